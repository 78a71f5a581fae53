#pragma once
// Tokens of the expression language of tessera.op (see expr_parser.h for the grammar).
//
// Newlines separate statements like ';' does, except inside brackets or parentheses, where
// they are plain whitespace (as in Python), so long expressions can be wrapped. '#' starts a
// comment that runs to the end of the line.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tessera::frontend {

enum class TokenKind : uint8_t {
  kIdent,
  kInt,    // 12
  kFloat,  // 1.5, 2., .5, 1e-5
  kLBracket,
  kRBracket,
  kLParen,
  kRParen,
  kComma,
  kSeparator,  // ';' or a newline outside brackets
  kAssign,     // =
  kPlus,
  kMinus,
  kStar,
  kSlash,       // /   true division
  kSlashSlash,  // //  floor division
  kPercent,     // %   floor modulo
  kLT,
  kLE,
  kGT,
  kGE,
  kEQ,   // ==
  kNE,   // !=
  kAnd,  // keyword `and`
  kOr,   // keyword `or`
  kNot,  // keyword `not`
  kEnd,
};

struct Token {
  TokenKind kind;
  size_t offset = 0;  // byte offset of the first character in the source
  std::string text;   // the characters of the token ("\n" for a newline separator)
  int64_t int_value = 0;
  double float_value = 0.0;
};

// Human-readable token kind for messages ("identifier", "'['", "end of input", ...).
const char* token_kind_name(TokenKind k);

// Splits `source` into tokens, ending with one kEnd token. Throws ExpressionError at the column
// of an unexpected character, an unbalanced closing bracket or an out-of-range integer literal.
std::vector<Token> lex_expression(const std::string& source);

}  // namespace tessera::frontend
