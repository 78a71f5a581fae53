#include "util/json.h"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

namespace tessera::util {

// ---------------------------------------------------------------------------------------------
// Value accessors
// ---------------------------------------------------------------------------------------------

const char* Json::type_name() const {
  switch (type_) {
    case Type::kNull:
      return "null";
    case Type::kBool:
      return "bool";
    case Type::kInt:
      return "int";
    case Type::kDouble:
      return "double";
    case Type::kString:
      return "string";
    case Type::kArray:
      return "array";
    case Type::kObject:
      return "object";
  }
  return "?";
}

void Json::set_unsigned(unsigned long long v) {
  if (v <= static_cast<unsigned long long>(std::numeric_limits<int64_t>::max())) {
    type_ = Type::kInt;
    int_ = static_cast<int64_t>(v);
  } else {
    type_ = Type::kDouble;
    double_ = static_cast<double>(v);
  }
}

void Json::type_error(const char* wanted) const {
  throw JsonError(std::string("JSON type error: expected ") + wanted + ", got " + type_name());
}

bool Json::as_bool() const {
  if (!is_bool()) type_error("bool");
  return bool_;
}

int64_t Json::as_int() const {
  if (is_int()) return int_;
  if (is_double()) {
    // 2^63 is exactly representable; values must be strictly below it to fit in int64.
    if (std::floor(double_) == double_ && double_ >= -9223372036854775808.0 &&
        double_ < 9223372036854775808.0) {
      return static_cast<int64_t>(double_);
    }
    throw JsonError("JSON type error: expected int, got non-integral double " + dump());
  }
  type_error("int");
}

double Json::as_double() const {
  if (is_double()) return double_;
  if (is_int()) return static_cast<double>(int_);
  type_error("number");
}

const std::string& Json::as_string() const {
  if (!is_string()) type_error("string");
  return string_;
}

const Json::Array& Json::as_array() const {
  if (!is_array()) type_error("array");
  return array_;
}

Json::Array& Json::as_array() {
  if (!is_array()) type_error("array");
  return array_;
}

const Json::Object& Json::as_object() const {
  if (!is_object()) type_error("object");
  return object_;
}

Json::Object& Json::as_object() {
  if (!is_object()) type_error("object");
  return object_;
}

size_t Json::size() const {
  if (is_array()) return array_.size();
  if (is_object()) return object_.size();
  return 0;
}

Json& Json::operator[](const std::string& key) {
  if (is_null()) type_ = Type::kObject;
  return as_object()[key];
}

const Json& Json::at(const std::string& key) const {
  const Object& obj = as_object();
  auto it = obj.find(key);
  if (it == obj.end()) throw JsonError("JSON object has no key \"" + key + "\"");
  return it->second;
}

bool Json::contains(const std::string& key) const { return find(key) != nullptr; }

const Json* Json::find(const std::string& key) const {
  if (!is_object()) return nullptr;
  auto it = object_.find(key);
  return it == object_.end() ? nullptr : &it->second;
}

Json& Json::operator[](size_t index) {
  Array& arr = as_array();
  if (index >= arr.size()) {
    throw JsonError("JSON array index " + std::to_string(index) + " out of range (size " +
                    std::to_string(arr.size()) + ")");
  }
  return arr[index];
}

const Json& Json::at(size_t index) const {
  const Array& arr = as_array();
  if (index >= arr.size()) {
    throw JsonError("JSON array index " + std::to_string(index) + " out of range (size " +
                    std::to_string(arr.size()) + ")");
  }
  return arr[index];
}

void Json::push_back(Json value) {
  if (is_null()) type_ = Type::kArray;
  as_array().push_back(std::move(value));
}

int64_t Json::get_int(const std::string& key, int64_t def) const {
  const Json* v = find(key);
  return v ? v->as_int() : def;
}

double Json::get_double(const std::string& key, double def) const {
  const Json* v = find(key);
  return v ? v->as_double() : def;
}

bool Json::get_bool(const std::string& key, bool def) const {
  const Json* v = find(key);
  return v ? v->as_bool() : def;
}

std::string Json::get_string(const std::string& key, const std::string& def) const {
  const Json* v = find(key);
  return v ? v->as_string() : def;
}

bool operator==(const Json& a, const Json& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_int() && b.is_int()) return a.int_ == b.int_;
    return a.as_double() == b.as_double();
  }
  if (a.type_ != b.type_) return false;
  switch (a.type_) {
    case Json::Type::kNull:
      return true;
    case Json::Type::kBool:
      return a.bool_ == b.bool_;
    case Json::Type::kString:
      return a.string_ == b.string_;
    case Json::Type::kArray:
      return a.array_ == b.array_;
    case Json::Type::kObject:
      return a.object_ == b.object_;
    default:
      return false;  // numbers handled above
  }
}

// ---------------------------------------------------------------------------------------------
// Printer
// ---------------------------------------------------------------------------------------------

namespace {

void dump_string(const std::string& s, std::string* out) {
  out->push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\b':
        *out += "\\b";
        break;
      case '\f':
        *out += "\\f";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\r':
        *out += "\\r";
        break;
      case '\t':
        *out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          *out += buf;
        } else {
          out->push_back(static_cast<char>(c));  // UTF-8 passes through unchanged
        }
    }
  }
  out->push_back('"');
}

void dump_double(double v, std::string* out) {
  if (!std::isfinite(v)) {
    *out += "null";
    return;
  }
  // Shortest of %.15g / %.16g / %.17g that reads back exactly: 17 significant digits always
  // round-trip, fewer usually do and read better (0.1 instead of 0.10000000000000001).
  char buf[40];
  for (int precision = 15; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  std::string text(buf);
  // Keep the "double" type on re-parse: 3.0 must not come back as the int 3.
  if (text.find_first_of(".eE") == std::string::npos) text += ".0";
  *out += text;
}

void dump_value(const Json& v, int indent, int depth, std::string* out) {
  auto newline = [&](int d) {
    if (indent < 0) return;
    out->push_back('\n');
    out->append(static_cast<size_t>(indent) * static_cast<size_t>(d), ' ');
  };
  switch (v.type()) {
    case Json::Type::kNull:
      *out += "null";
      break;
    case Json::Type::kBool:
      *out += v.as_bool() ? "true" : "false";
      break;
    case Json::Type::kInt:
      *out += std::to_string(v.as_int());
      break;
    case Json::Type::kDouble:
      dump_double(v.as_double(), out);
      break;
    case Json::Type::kString:
      dump_string(v.as_string(), out);
      break;
    case Json::Type::kArray: {
      const auto& arr = v.as_array();
      if (arr.empty()) {
        *out += "[]";
        break;
      }
      out->push_back('[');
      for (size_t i = 0; i < arr.size(); ++i) {
        if (i) out->push_back(',');
        newline(depth + 1);
        dump_value(arr[i], indent, depth + 1, out);
      }
      newline(depth);
      out->push_back(']');
      break;
    }
    case Json::Type::kObject: {
      const auto& obj = v.as_object();
      if (obj.empty()) {
        *out += "{}";
        break;
      }
      out->push_back('{');
      bool first = true;
      for (const auto& kv : obj) {
        if (!first) out->push_back(',');
        first = false;
        newline(depth + 1);
        dump_string(kv.first, out);
        out->push_back(':');
        if (indent >= 0) out->push_back(' ');
        dump_value(kv.second, indent, depth + 1, out);
      }
      newline(depth);
      out->push_back('}');
      break;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Parser (recursive descent over the whole text held in memory)
// ---------------------------------------------------------------------------------------------

class Parser {
 public:
  explicit Parser(const std::string& text) : s_(text) {}

  Json parse_document() {
    skip_ws();
    Json v = parse_value(0);
    skip_ws();
    if (pos_ != s_.size()) fail("unexpected trailing characters after JSON value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& msg) const { fail_at(pos_, msg); }

  [[noreturn]] void fail_at(size_t at, const std::string& msg) const {
    // Line/column are computed only on error, so the happy path stays a plain index walk.
    int line = 1, col = 1;
    for (size_t i = 0; i < at && i < s_.size(); ++i) {
      if (s_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    throw JsonError("JSON parse error at line " + std::to_string(line) + ", column " +
                    std::to_string(col) + ": " + msg);
  }

  std::string describe_current() const {
    if (pos_ >= s_.size()) return "end of input";
    char c = s_[pos_];
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
      char buf[16];
      std::snprintf(buf, sizeof(buf), "byte 0x%02x", static_cast<unsigned char>(c));
      return buf;
    }
    return std::string("'") + c + "'";
  }

  void skip_ws() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) {
      ++pos_;
    }
  }

  void expect_literal(const char* word, size_t len) {
    if (s_.compare(pos_, len, word) != 0)
      fail(std::string("invalid literal, expected '") + word + "'");
    pos_ += len;
  }

  Json parse_value(int depth) {
    if (depth >= Json::kMaxDepth) fail("nesting deeper than " + std::to_string(Json::kMaxDepth));
    if (pos_ >= s_.size()) fail("unexpected end of input, expected a value");
    char c = s_[pos_];
    switch (c) {
      case '{':
        return parse_object(depth);
      case '[':
        return parse_array(depth);
      case '"':
        return Json(parse_string());
      case 't':
        expect_literal("true", 4);
        return Json(true);
      case 'f':
        expect_literal("false", 5);
        return Json(false);
      case 'n':
        expect_literal("null", 4);
        return Json();
      default:
        if (c == '-' || (c >= '0' && c <= '9')) return parse_number();
        fail("unexpected " + describe_current() + ", expected a value");
    }
  }

  Json parse_object(int depth) {
    ++pos_;  // '{'
    Json::Object obj;
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == '}') {
      ++pos_;
      return Json(std::move(obj));
    }
    while (true) {
      skip_ws();
      if (pos_ >= s_.size() || s_[pos_] != '"') {
        fail("unexpected " + describe_current() + ", expected a string key");
      }
      std::string key = parse_string();
      skip_ws();
      if (pos_ >= s_.size() || s_[pos_] != ':') {
        fail("unexpected " + describe_current() + ", expected ':' after key");
      }
      ++pos_;
      skip_ws();
      // Duplicate keys: the last one wins (what most parsers do; RFC 8259 leaves it open).
      obj[key] = parse_value(depth + 1);
      skip_ws();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == '}') {
        ++pos_;
        return Json(std::move(obj));
      }
      fail("unexpected " + describe_current() + ", expected ',' or '}' in object");
    }
  }

  Json parse_array(int depth) {
    ++pos_;  // '['
    Json::Array arr;
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == ']') {
      ++pos_;
      return Json(std::move(arr));
    }
    while (true) {
      skip_ws();
      arr.push_back(parse_value(depth + 1));
      skip_ws();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == ']') {
        ++pos_;
        return Json(std::move(arr));
      }
      fail("unexpected " + describe_current() + ", expected ',' or ']' in array");
    }
  }

  unsigned parse_hex4() {
    if (pos_ + 4 > s_.size()) fail("truncated \\u escape");
    unsigned v = 0;
    for (int i = 0; i < 4; ++i) {
      char c = s_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9')
        v |= static_cast<unsigned>(c - '0');
      else if (c >= 'a' && c <= 'f')
        v |= static_cast<unsigned>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        v |= static_cast<unsigned>(c - 'A' + 10);
      else
        fail_at(pos_ - 1, "invalid hex digit in \\u escape");
    }
    return v;
  }

  static void append_utf8(unsigned cp, std::string* out) {
    if (cp < 0x80) {
      out->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  std::string parse_string() {
    size_t start = pos_;
    ++pos_;  // opening quote
    std::string out;
    while (true) {
      if (pos_ >= s_.size()) fail_at(start, "unterminated string");
      unsigned char c = static_cast<unsigned char>(s_[pos_]);
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (c < 0x20) fail("unescaped control character (" + describe_current() + ") in string");
      if (c != '\\') {
        out.push_back(static_cast<char>(c));
        ++pos_;
        continue;
      }
      ++pos_;  // backslash
      if (pos_ >= s_.size()) fail_at(start, "unterminated string");
      char e = s_[pos_++];
      switch (e) {
        case '"':
          out.push_back('"');
          break;
        case '\\':
          out.push_back('\\');
          break;
        case '/':
          out.push_back('/');
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'u': {
          size_t esc = pos_ - 2;
          unsigned cp = parse_hex4();
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            // A high surrogate must be followed by an escaped low surrogate.
            if (s_.compare(pos_, 2, "\\u") != 0)
              fail_at(esc, "unpaired high surrogate in \\u escape");
            pos_ += 2;
            unsigned lo = parse_hex4();
            if (lo < 0xDC00 || lo > 0xDFFF) fail_at(esc, "invalid low surrogate in \\u escape");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            fail_at(esc, "unpaired low surrogate in \\u escape");
          }
          append_utf8(cp, &out);
          break;
        }
        default:
          fail_at(pos_ - 1, std::string("invalid escape '\\") + e + "'");
      }
    }
  }

  Json parse_number() {
    size_t start = pos_;
    bool is_integer = true;
    if (s_[pos_] == '-') ++pos_;
    if (pos_ >= s_.size() || !isdigit_at(pos_)) fail("invalid number: expected a digit");
    if (s_[pos_] == '0') {
      ++pos_;
      if (pos_ < s_.size() && isdigit_at(pos_))
        fail("invalid number: leading zeros are not allowed");
    } else {
      while (pos_ < s_.size() && isdigit_at(pos_)) ++pos_;
    }
    if (pos_ < s_.size() && s_[pos_] == '.') {
      is_integer = false;
      ++pos_;
      if (pos_ >= s_.size() || !isdigit_at(pos_))
        fail("invalid number: expected a digit after '.'");
      while (pos_ < s_.size() && isdigit_at(pos_)) ++pos_;
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      is_integer = false;
      ++pos_;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      if (pos_ >= s_.size() || !isdigit_at(pos_)) fail("invalid number: expected exponent digits");
      while (pos_ < s_.size() && isdigit_at(pos_)) ++pos_;
    }
    std::string text = s_.substr(start, pos_ - start);
    if (is_integer) {
      errno = 0;
      char* end = nullptr;
      long long v = std::strtoll(text.c_str(), &end, 10);
      if (errno != ERANGE) return Json(static_cast<int64_t>(v));
      // Integers beyond int64 fall back to double (precision loss is unavoidable there).
    }
    return Json(std::strtod(text.c_str(), nullptr));
  }

  bool isdigit_at(size_t i) const { return s_[i] >= '0' && s_[i] <= '9'; }

  const std::string& s_;
  size_t pos_ = 0;
};

}  // namespace

std::string Json::dump(int indent) const {
  std::string out;
  dump_value(*this, indent, 0, &out);
  return out;
}

Json Json::parse(const std::string& text) { return Parser(text).parse_document(); }

bool Json::try_parse(const std::string& text, Json* out, std::string* error) {
  try {
    *out = parse(text);
    return true;
  } catch (const JsonError& e) {
    if (error) *error = e.what();
    return false;
  }
}

// ---------------------------------------------------------------------------------------------
// Files
// ---------------------------------------------------------------------------------------------

Json read_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw JsonError("cannot open JSON file '" + path + "': " + std::strerror(errno));
  std::stringstream buf;
  buf << in.rdbuf();
  if (in.bad()) throw JsonError("cannot read JSON file '" + path + "'");
  try {
    return Json::parse(buf.str());
  } catch (const JsonError& e) {
    throw JsonError(path + ": " + e.what());
  }
}

bool write_json_file(const std::string& path, const Json& value, int indent, std::string* error) {
  std::string tmp = path + ".tmp." + std::to_string(static_cast<long>(::getpid()));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) {
      if (error) *error = "cannot create '" + tmp + "': " + std::strerror(errno);
      return false;
    }
    out << value.dump(indent) << '\n';
    out.flush();
    if (!out) {
      if (error) *error = "cannot write '" + tmp + "'";
      std::remove(tmp.c_str());
      return false;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    if (error) *error = "cannot rename '" + tmp + "' to '" + path + "': " + std::strerror(errno);
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

}  // namespace tessera::util
