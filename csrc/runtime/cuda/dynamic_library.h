#pragma once
// A shared library opened at run time (dlopen), so that Tessera builds, imports and runs on the
// CPU where the CUDA libraries are absent, and finds them where they exist.
#include <memory>
#include <string>
#include <vector>

namespace tessera::runtime::cuda {

class DynamicLibrary {
 public:
  // Opens the first of `names` that loads (each as dlopen takes it: a file name searched on the
  // loader's path, or a path). Returns null, with what every attempt said in `*error`, when none
  // does.
  static std::unique_ptr<DynamicLibrary> open(const std::vector<std::string>& names,
                                              std::string* error);
  ~DynamicLibrary();
  DynamicLibrary(const DynamicLibrary&) = delete;
  DynamicLibrary& operator=(const DynamicLibrary&) = delete;

  // The address of `symbol`, or null when the library has none.
  void* symbol(const char* name) const;
  // Sets `*out` to the function `name`; false, with the reason in `*why_not`, when missing.
  template <typename F>
  bool bind(const char* name, F* out, std::string* why_not) const {
    *out = reinterpret_cast<F>(symbol(name));
    if (!*out) *why_not = name_ + " has no " + name;
    return *out != nullptr;
  }
  const std::string& name() const { return name_; }

 private:
  DynamicLibrary(void* handle, std::string name) : handle_(handle), name_(std::move(name)) {}
  void* handle_;
  std::string name_;
};

// Candidate names for a library: the path in environment variable `env_var` when set, then
// `names`.
std::vector<std::string> library_candidates(const char* env_var,
                                            const std::vector<std::string>& names);

}  // namespace tessera::runtime::cuda
