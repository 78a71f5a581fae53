#include "frontend/expr_error.h"

#include <algorithm>

namespace tessera::frontend {

namespace {

struct Location {
  int line = 1;
  int column = 1;
  size_t line_begin = 0;
  size_t line_end = 0;
  bool multi_line = false;
};

bool is_utf8_continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

Location locate(const std::string& source, size_t offset) {
  offset = std::min(offset, source.size());
  Location loc;
  for (size_t i = 0; i < offset; ++i) {
    if (source[i] == '\n') {
      ++loc.line;
      loc.line_begin = i + 1;
    }
  }
  // Columns count code points so the caret lines up under non-ASCII text too.
  for (size_t i = loc.line_begin; i < offset; ++i) {
    if (!is_utf8_continuation(source[i])) ++loc.column;
  }
  loc.line_end = source.find('\n', loc.line_begin);
  if (loc.line_end == std::string::npos) loc.line_end = source.size();
  // A trailing newline alone does not make a source multi-line.
  size_t last = source.find_last_not_of(" \t\r\n");
  loc.multi_line = last != std::string::npos && source.find('\n') < last;
  return loc;
}

}  // namespace

std::string describe_position(const std::string& source, size_t offset) {
  Location loc = locate(source, offset);
  std::string out;
  if (loc.multi_line) out += "line " + std::to_string(loc.line) + ", ";
  return out + "column " + std::to_string(loc.column);
}

std::string format_expression_error(const std::string& source, size_t offset,
                                    const std::string& message) {
  if (offset == ExpressionError::kNoOffset) return "expression error: " + message;
  Location loc = locate(source, offset);
  std::string out = "expression error at " + describe_position(source, offset) + ": " + message;
  out += "\n  ";
  std::string line = source.substr(loc.line_begin, loc.line_end - loc.line_begin);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  out += line + "\n  ";
  // Tabs are copied so the caret stays aligned whatever the tab width.
  for (size_t i = loc.line_begin; i < std::min(offset, source.size()); ++i) {
    if (source[i] == '\t') {
      out += '\t';
    } else if (!is_utf8_continuation(source[i])) {
      out += ' ';
    }
  }
  out += '^';
  return out;
}

ExpressionError::ExpressionError(const std::string& source, size_t offset,
                                 const std::string& message)
    : Error(format_expression_error(source, offset, message)),
      offset_(offset == kNoOffset ? kNoOffset : std::min(offset, source.size())),
      line_(0),
      column_(0),
      detail_(message) {
  if (offset == kNoOffset) return;
  Location loc = locate(source, offset);
  line_ = loc.line;
  column_ = loc.column;
}

std::string strip_check_prefix(const std::string& what) {
  const std::string marker = "check failed: ";
  size_t p = what.find(marker);
  if (p == std::string::npos) return what;
  // After the marker comes "<condition>: <message>"; the condition is code, not for users.
  size_t colon = what.find(": ", p + marker.size());
  if (colon == std::string::npos) return what.substr(p + marker.size());
  return what.substr(colon + 2);
}

}  // namespace tessera::frontend
