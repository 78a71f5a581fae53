#include "frontend/expr_lexer.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>

#include "frontend/expr_error.h"

namespace tessera::frontend {

const char* token_kind_name(TokenKind k) {
  switch (k) {
    case TokenKind::kIdent:
      return "identifier";
    case TokenKind::kInt:
      return "integer";
    case TokenKind::kFloat:
      return "number";
    case TokenKind::kLBracket:
      return "'['";
    case TokenKind::kRBracket:
      return "']'";
    case TokenKind::kLParen:
      return "'('";
    case TokenKind::kRParen:
      return "')'";
    case TokenKind::kComma:
      return "','";
    case TokenKind::kSeparator:
      return "end of statement";
    case TokenKind::kAssign:
      return "'='";
    case TokenKind::kPlus:
      return "'+'";
    case TokenKind::kMinus:
      return "'-'";
    case TokenKind::kStar:
      return "'*'";
    case TokenKind::kSlash:
      return "'/'";
    case TokenKind::kSlashSlash:
      return "'//'";
    case TokenKind::kPercent:
      return "'%'";
    case TokenKind::kLT:
      return "'<'";
    case TokenKind::kLE:
      return "'<='";
    case TokenKind::kGT:
      return "'>'";
    case TokenKind::kGE:
      return "'>='";
    case TokenKind::kEQ:
      return "'=='";
    case TokenKind::kNE:
      return "'!='";
    case TokenKind::kAnd:
      return "'and'";
    case TokenKind::kOr:
      return "'or'";
    case TokenKind::kNot:
      return "'not'";
    case TokenKind::kEnd:
      return "end of input";
  }
  return "?";
}

namespace {

bool is_ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool is_digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

class Lexer {
 public:
  explicit Lexer(const std::string& src) : src_(src) {}

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      char c = src_[pos_];
      if (c == ' ' || c == '\t' || c == '\r') {
        ++pos_;
      } else if (c == '#') {
        while (pos_ < src_.size() && src_[pos_] != '\n') ++pos_;
      } else if (c == '\n') {
        if (depth_ == 0) push(TokenKind::kSeparator, pos_, 1);
        ++pos_;
      } else if (is_ident_start(c)) {
        lex_identifier();
      } else if (is_digit(c) || (c == '.' && pos_ + 1 < src_.size() && is_digit(src_[pos_ + 1]))) {
        lex_number();
      } else {
        lex_punctuation(c);
      }
    }
    if (!openers_.empty()) {
      throw ExpressionError(src_, opener_offsets_.back(),
                            std::string("'") + openers_.back() + "' is never closed");
    }
    push(TokenKind::kEnd, src_.size(), 0);
    return std::move(tokens_);
  }

 private:
  void push(TokenKind kind, size_t begin, size_t len) {
    Token t;
    t.kind = kind;
    t.offset = begin;
    t.text = src_.substr(begin, len);
    tokens_.push_back(std::move(t));
  }

  void lex_identifier() {
    size_t begin = pos_;
    while (pos_ < src_.size() && is_ident_char(src_[pos_])) ++pos_;
    std::string word = src_.substr(begin, pos_ - begin);
    TokenKind kind = TokenKind::kIdent;
    if (word == "and") kind = TokenKind::kAnd;
    if (word == "or") kind = TokenKind::kOr;
    if (word == "not") kind = TokenKind::kNot;
    push(kind, begin, pos_ - begin);
  }

  void lex_number() {
    size_t begin = pos_;
    bool is_float = false;
    while (pos_ < src_.size() && is_digit(src_[pos_])) ++pos_;
    if (pos_ < src_.size() && src_[pos_] == '.') {
      is_float = true;
      ++pos_;
      while (pos_ < src_.size() && is_digit(src_[pos_])) ++pos_;
    }
    if (pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
      size_t p = pos_ + 1;
      if (p < src_.size() && (src_[p] == '+' || src_[p] == '-')) ++p;
      if (p < src_.size() && is_digit(src_[p])) {
        is_float = true;
        pos_ = p;
        while (pos_ < src_.size() && is_digit(src_[pos_])) ++pos_;
      } else {
        throw ExpressionError(src_, pos_, "malformed exponent in number literal");
      }
    }
    if (pos_ < src_.size() && is_ident_start(src_[pos_])) {
      throw ExpressionError(src_, pos_,
                            "unexpected '" + std::string(1, src_[pos_]) +
                                "' after a number (write an operator, e.g. 2 * i)");
    }
    push(is_float ? TokenKind::kFloat : TokenKind::kInt, begin, pos_ - begin);
    Token& t = tokens_.back();
    errno = 0;
    if (is_float) {
      t.float_value = std::strtod(t.text.c_str(), nullptr);
    } else {
      t.int_value = std::strtoll(t.text.c_str(), nullptr, 10);
      if (errno == ERANGE) throw ExpressionError(src_, begin, "integer literal out of range");
      t.float_value = static_cast<double>(t.int_value);
    }
  }

  void lex_punctuation(char c) {
    size_t begin = pos_;
    char next = pos_ + 1 < src_.size() ? src_[pos_ + 1] : '\0';
    auto two = [&](TokenKind k) {
      push(k, begin, 2);
      pos_ += 2;
    };
    auto one = [&](TokenKind k) {
      push(k, begin, 1);
      pos_ += 1;
    };
    switch (c) {
      case '[':
      case '(':
        ++depth_;
        openers_.push_back(c);
        opener_offsets_.push_back(begin);
        return one(c == '[' ? TokenKind::kLBracket : TokenKind::kLParen);
      case ']':
      case ')': {
        char want = c == ']' ? '[' : '(';
        if (openers_.empty()) {
          throw ExpressionError(src_, begin, std::string("unmatched '") + c + "'");
        }
        if (openers_.back() != want) {
          throw ExpressionError(src_, begin,
                                std::string("'") + c + "' closes the '" + openers_.back() +
                                    "' at " + describe_position(src_, opener_offsets_.back()));
        }
        openers_.pop_back();
        opener_offsets_.pop_back();
        --depth_;
        return one(c == ']' ? TokenKind::kRBracket : TokenKind::kRParen);
      }
      case ',':
        return one(TokenKind::kComma);
      case ';':
        return one(TokenKind::kSeparator);
      case '+':
        return one(TokenKind::kPlus);
      case '-':
        return one(TokenKind::kMinus);
      case '*':
        if (next == '*') {
          throw ExpressionError(src_, begin, "'**' is not supported; use pow(x, y)");
        }
        return one(TokenKind::kStar);
      case '/':
        return next == '/' ? two(TokenKind::kSlashSlash) : one(TokenKind::kSlash);
      case '%':
        return one(TokenKind::kPercent);
      case '<':
        return next == '=' ? two(TokenKind::kLE) : one(TokenKind::kLT);
      case '>':
        return next == '=' ? two(TokenKind::kGE) : one(TokenKind::kGT);
      case '=':
        return next == '=' ? two(TokenKind::kEQ) : one(TokenKind::kAssign);
      case '!':
        if (next == '=') return two(TokenKind::kNE);
        throw ExpressionError(src_, begin, "unexpected '!' (use 'not' for negation)");
      default:
        break;
    }
    // Name the character; a byte of a multi-byte UTF-8 sequence is shown as the whole sequence.
    size_t len = 1;
    while (begin + len < src_.size() &&
           (static_cast<unsigned char>(src_[begin + len]) & 0xC0) == 0x80) {
      ++len;
    }
    throw ExpressionError(src_, begin, "unexpected character '" + src_.substr(begin, len) + "'");
  }

  const std::string& src_;
  size_t pos_ = 0;
  int depth_ = 0;
  std::vector<char> openers_;
  std::vector<size_t> opener_offsets_;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> lex_expression(const std::string& source) { return Lexer(source).run(); }

}  // namespace tessera::frontend
