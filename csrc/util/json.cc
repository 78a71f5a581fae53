#include "util/json.h"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
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
// Text: nlohmann-json parses and prints; Json keeps Tessera's value semantics on top (int64 vs
// double kept apart, typed accessors that throw JsonError, sorted keys).
// ---------------------------------------------------------------------------------------------

namespace {

nlohmann::json to_nlohmann(const Json& v) {
  switch (v.type()) {
    case Json::Type::kNull:
      return nullptr;
    case Json::Type::kBool:
      return v.as_bool();
    case Json::Type::kInt:
      return v.as_int();
    case Json::Type::kDouble:
      return v.as_double();  // printed with a '.' or an exponent; non-finite as null
    case Json::Type::kString:
      return v.as_string();
    case Json::Type::kArray: {
      nlohmann::json a = nlohmann::json::array();
      for (const Json& x : v.as_array()) a.push_back(to_nlohmann(x));
      return a;
    }
    case Json::Type::kObject: {
      nlohmann::json o = nlohmann::json::object();
      for (const auto& [k, x] : v.as_object()) o[k] = to_nlohmann(x);
      return o;
    }
  }
  return nullptr;
}

// Recurses once per nesting level: parse() has checked the depth first (check_depth).
Json from_nlohmann(const nlohmann::json& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::null:
      return Json();
    case nlohmann::json::value_t::boolean:
      return Json(v.get<bool>());
    case nlohmann::json::value_t::number_integer:
      return Json(v.get<int64_t>());
    case nlohmann::json::value_t::number_unsigned:
      return Json(v.get<unsigned long long>());  // above INT64_MAX: a double
    case nlohmann::json::value_t::number_float:
      return Json(v.get<double>());
    case nlohmann::json::value_t::string:
      return Json(v.get<std::string>());
    case nlohmann::json::value_t::array: {
      Json::Array a;
      a.reserve(v.size());
      for (const nlohmann::json& x : v) a.push_back(from_nlohmann(x));
      return Json(std::move(a));
    }
    case nlohmann::json::value_t::object: {
      Json::Object o;
      for (const auto& [k, x] : v.items()) o[k] = from_nlohmann(x);
      return Json(std::move(o));
    }
    default:
      throw JsonError("unsupported JSON value (binary or discarded)");
  }
}

// "line L, column C" of the byte at `offset` (0-based) in `text`.
std::string position(const std::string& text, size_t offset) {
  size_t line = 1, column = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(column);
}

// Refuses documents nested deeper than Json::kMaxDepth before anything is built from them (the
// conversion to Json recurses once per level). Brackets inside strings do not count.
void check_depth(const std::string& text) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > Json::kMaxDepth) {
        throw JsonError(position(text, i) + ": nesting deeper than " +
                        std::to_string(Json::kMaxDepth) + " levels");
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
}

}  // namespace

std::string Json::dump(int indent) const {
  // Invalid UTF-8 in a string is replaced (U+FFFD) rather than failing the whole dump.
  return to_nlohmann(*this).dump(indent < 0 ? -1 : indent, ' ', false,
                                 nlohmann::json::error_handler_t::replace);
}

Json Json::parse(const std::string& text) {
  check_depth(text);
  try {
    return from_nlohmann(nlohmann::json::parse(text));
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte is the 1-based position of the offending character (or one past the end).
    const size_t offset = e.byte > 0 ? e.byte - 1 : 0;
    std::string what = e.what();
    const size_t colon = what.find(": ", what.find("parse error"));
    throw JsonError(position(text, offset) + ": " +
                    (colon == std::string::npos ? what : what.substr(colon + 2)));
  }
}

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
