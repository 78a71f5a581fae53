#pragma once
// Errors in user-written expressions (tessera.op sources). They point at a position in the
// source: the message names the column (and the line, for multi-line sources) and repeats the
// offending line with a caret under the column, so a mistake is found without counting.
#include <cstddef>
#include <string>

#include "util/check.h"

namespace tessera::frontend {

class ExpressionError : public Error {
 public:
  // `offset` is a byte offset into `source` (source.size() points just past the end). kNoOffset
  // makes an error about the expression as a whole ("expression error: message").
  ExpressionError(const std::string& source, size_t offset, const std::string& message);
  static constexpr size_t kNoOffset = static_cast<size_t>(-1);

  size_t offset() const { return offset_; }
  int line() const { return line_; }      // 1-based; 0 for kNoOffset
  int column() const { return column_; }  // 1-based, in characters (UTF-8 code points); 0 likewise
  // The message without location and source excerpt.
  const std::string& detail() const { return detail_; }

 private:
  size_t offset_;
  int line_;
  int column_;
  std::string detail_;
};

// "expression error at column N: message\n  <line>\n  <spaces>^" ("at line L, column N" when the
// source has several lines).
std::string format_expression_error(const std::string& source, size_t offset,
                                    const std::string& message);

// "column N", or "line L, column N" when the source has several lines: for messages that refer
// to a second position (e.g. where an iterator got its extent).
std::string describe_position(const std::string& source, size_t offset);

// The message of a core tessera::Error without the "file:line: check failed: cond: " prefix that
// TESSERA_CHECK adds (useful to users only as noise when re-raised at an expression column).
std::string strip_check_prefix(const std::string& what);

}  // namespace tessera::frontend
