#pragma once
// A small JSON value type; nlohmann-json does the parsing and printing (json.cc).
//
// Used for schedule serialisation, tuning caches and hardware description files. It is written for
// clarity and predictable output rather than speed: objects keep their keys sorted (std::map), so
// dump() is deterministic and two equal values always print the same text (useful as cache keys).
// Integers and doubles are kept apart so that int64 values (sizes, seeds) survive a round trip
// exactly.

#include <cstdint>
#include <initializer_list>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace tessera::util {

// Thrown by Json::parse (with "line L, column C: ..." in what()) and by typed accessors used on a
// value of the wrong type.
class JsonError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Json {
 public:
  enum class Type { kNull, kBool, kInt, kDouble, kString, kArray, kObject };
  using Array = std::vector<Json>;
  using Object = std::map<std::string, Json>;

  Json() = default;  // null
  Json(std::nullptr_t) {}
  Json(bool b) : type_(Type::kBool), bool_(b) {}
  Json(int v) : type_(Type::kInt), int_(v) {}
  Json(long v) : type_(Type::kInt), int_(v) {}
  Json(long long v) : type_(Type::kInt), int_(v) {}
  Json(unsigned v) : type_(Type::kInt), int_(v) {}
  // Unsigned 64-bit values above INT64_MAX are stored as double (JSON has one number type).
  Json(unsigned long v) { set_unsigned(v); }
  Json(unsigned long long v) { set_unsigned(v); }
  Json(double v) : type_(Type::kDouble), double_(v) {}
  Json(float v) : type_(Type::kDouble), double_(v) {}
  Json(const char* s) : type_(Type::kString), string_(s) {}
  Json(std::string s) : type_(Type::kString), string_(std::move(s)) {}
  Json(Array a) : type_(Type::kArray), array_(std::move(a)) {}
  Json(Object o) : type_(Type::kObject), object_(std::move(o)) {}

  static Json array(std::initializer_list<Json> items = {}) { return Json(Array(items)); }
  static Json object() { return Json(Object()); }
  // object({{"a", 1}, {"b", "x"}})
  static Json object(std::initializer_list<std::pair<const std::string, Json>> items) {
    return Json(Object(items));
  }

  Type type() const { return type_; }
  const char* type_name() const;
  bool is_null() const { return type_ == Type::kNull; }
  bool is_bool() const { return type_ == Type::kBool; }
  bool is_int() const { return type_ == Type::kInt; }
  bool is_double() const { return type_ == Type::kDouble; }
  bool is_number() const { return is_int() || is_double(); }
  bool is_string() const { return type_ == Type::kString; }
  bool is_array() const { return type_ == Type::kArray; }
  bool is_object() const { return type_ == Type::kObject; }

  // Typed accessors; throw JsonError on a type mismatch. as_int() also accepts a double holding an
  // exact integer in int64 range (other writers may print 3.0); as_double() accepts ints.
  bool as_bool() const;
  int64_t as_int() const;
  double as_double() const;
  const std::string& as_string() const;
  const Array& as_array() const;
  Array& as_array();
  const Object& as_object() const;
  Object& as_object();

  // Number of array elements or object members; 0 for scalars and null.
  size_t size() const;

  // Object access. The non-const operator[] turns a null into an empty object (so building nested
  // values reads naturally); at() throws JsonError if the key is missing.
  Json& operator[](const std::string& key);
  Json& operator[](const char* key) { return (*this)[std::string(key)]; }
  const Json& at(const std::string& key) const;
  bool contains(const std::string& key) const;
  // Member or nullptr; never throws (nullptr also when this is not an object).
  const Json* find(const std::string& key) const;

  // Array access (at() throws JsonError when out of range). push_back turns a null into an array.
  Json& operator[](size_t index);
  // Without this overload j[0] would be ambiguous between size_t and const char* (null pointer).
  Json& operator[](int index) { return (*this)[static_cast<size_t>(index)]; }
  const Json& at(size_t index) const;
  void push_back(Json value);

  // Convenience getters with a default for missing keys (throw if present with a wrong type).
  int64_t get_int(const std::string& key, int64_t def) const;
  double get_double(const std::string& key, double def) const;
  bool get_bool(const std::string& key, bool def) const;
  std::string get_string(const std::string& key, const std::string& def) const;

  // indent < 0: compact single line. indent >= 0: pretty-printed with that many spaces per level.
  // Non-finite doubles print as null (JSON cannot represent them). Doubles print with the fewest
  // digits that read back to the same value, always with a '.' or exponent so they re-parse as
  // doubles.
  std::string dump(int indent = -1) const;

  // Strict RFC 8259 parser (no comments, no trailing commas). Accepts surrounding whitespace.
  // Throws JsonError with line/column. Nesting is limited to kMaxDepth levels.
  static Json parse(const std::string& text);
  // Non-throwing variant: returns false and fills *error (if non-null).
  static bool try_parse(const std::string& text, Json* out, std::string* error);
  static constexpr int kMaxDepth = 512;

  // Deep equality. An int and a double are equal when they hold the same numeric value.
  friend bool operator==(const Json& a, const Json& b);
  friend bool operator!=(const Json& a, const Json& b) { return !(a == b); }

 private:
  void set_unsigned(unsigned long long v);
  [[noreturn]] void type_error(const char* wanted) const;

  Type type_ = Type::kNull;
  bool bool_ = false;
  int64_t int_ = 0;
  double double_ = 0.0;
  std::string string_;
  Array array_;
  Object object_;
};

// Reads/writes a whole file. read_json_file throws JsonError (message includes the path) on I/O or
// parse errors. write_json_file writes to "<path>.tmp.<pid>" then renames, so a concurrent reader
// never sees a half-written file; returns false (and fills *error) on failure.
Json read_json_file(const std::string& path);
bool write_json_file(const std::string& path, const Json& value, int indent, std::string* error);

}  // namespace tessera::util
