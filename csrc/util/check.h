#pragma once
// Error reporting for the whole core: TESSERA_CHECK(cond) << "message" throws tessera::Error.
// Errors are exceptions (not aborts) so the Python layer can turn them into clear messages or a
// logged fallback to eager instead of taking the user's process down.
#include <sstream>
#include <stdexcept>
#include <string>

namespace tessera {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

namespace detail {
// Collects a message with operator<< and throws when destroyed at the end of the statement.
class ErrorBuilder {
 public:
  ErrorBuilder(const char* file, int line, const char* cond) {
    stream_ << file << ":" << line << ": check failed: " << cond << ": ";
  }
  template <typename T>
  ErrorBuilder& operator<<(const T& v) {
    stream_ << v;
    return *this;
  }
  [[noreturn]] ~ErrorBuilder() noexcept(false) { throw Error(stream_.str()); }

 private:
  std::ostringstream stream_;
};
}  // namespace detail

}  // namespace tessera

#define TESSERA_CHECK(cond) \
  if (cond) {               \
  } else                    \
    ::tessera::detail::ErrorBuilder(__FILE__, __LINE__, #cond)

#define TESSERA_FAIL() ::tessera::detail::ErrorBuilder(__FILE__, __LINE__, "failure")
