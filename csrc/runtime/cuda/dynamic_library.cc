#include "runtime/cuda/dynamic_library.h"

#include <dlfcn.h>

#include <cstdlib>

namespace tessera::runtime::cuda {

std::unique_ptr<DynamicLibrary> DynamicLibrary::open(const std::vector<std::string>& names,
                                                     std::string* error) {
  std::string tried;
  for (const std::string& n : names) {
    if (void* h = ::dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      return std::unique_ptr<DynamicLibrary>(new DynamicLibrary(h, n));
    }
    const char* why = ::dlerror();
    tried += (tried.empty() ? "" : "; ") + std::string(why ? why : n + ": not loadable");
  }
  if (error) *error = tried.empty() ? "no library name to try" : tried;
  return nullptr;
}

DynamicLibrary::~DynamicLibrary() { ::dlclose(handle_); }

void* DynamicLibrary::symbol(const char* name) const { return ::dlsym(handle_, name); }

std::vector<std::string> library_candidates(const char* env_var,
                                            const std::vector<std::string>& names) {
  std::vector<std::string> all;
  if (const char* path = std::getenv(env_var); path && *path) all.push_back(path);
  all.insert(all.end(), names.begin(), names.end());
  return all;
}

}  // namespace tessera::runtime::cuda
