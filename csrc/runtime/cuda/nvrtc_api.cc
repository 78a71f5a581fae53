#include "runtime/cuda/nvrtc_api.h"

#include <memory>

#include "runtime/cuda/dynamic_library.h"

namespace tessera::runtime::cuda {

namespace {

// The toolkit's unversioned name, then the sonames of the releases that produce sm_90 cubins.
const std::vector<std::string>& nvrtc_names() {
  static const std::vector<std::string> names = {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12",
                                                 "libnvrtc.so.11.2"};
  return names;
}

constexpr const char* kNvrtcEnv = "TESSERA_NVRTC_LIBRARY";

struct Loaded {
  std::unique_ptr<DynamicLibrary> lib;
  NvrtcApi api{};
  bool ok = false;
  std::string why_not;
};

Loaded load() {
  Loaded l;
  l.lib = DynamicLibrary::open(library_candidates(kNvrtcEnv, nvrtc_names()), &l.why_not);
  if (!l.lib) {
    l.why_not = "NVRTC not found (" + l.why_not + ")";
    return l;
  }
  const DynamicLibrary& d = *l.lib;
  NvrtcApi& a = l.api;
  l.ok = d.bind("nvrtcGetErrorString", &a.GetErrorString, &l.why_not) &&
         d.bind("nvrtcVersion", &a.Version, &l.why_not) &&
         d.bind("nvrtcCreateProgram", &a.CreateProgram, &l.why_not) &&
         d.bind("nvrtcCompileProgram", &a.CompileProgram, &l.why_not) &&
         d.bind("nvrtcGetCUBINSize", &a.GetCUBINSize, &l.why_not) &&
         d.bind("nvrtcGetCUBIN", &a.GetCUBIN, &l.why_not) &&
         d.bind("nvrtcGetProgramLogSize", &a.GetProgramLogSize, &l.why_not) &&
         d.bind("nvrtcGetProgramLog", &a.GetProgramLog, &l.why_not) &&
         d.bind("nvrtcDestroyProgram", &a.DestroyProgram, &l.why_not);
  return l;
}

}  // namespace

const NvrtcApi* nvrtc_api(std::string* why_not) {
  static const Loaded loaded = load();  // thread-safe once
  if (!loaded.ok && why_not) *why_not = loaded.why_not;
  return loaded.ok ? &loaded.api : nullptr;
}

std::string nvrtc_search_text() {
  std::string s;
  for (const std::string& n : library_candidates(kNvrtcEnv, nvrtc_names())) {
    s += (s.empty() ? "" : ", ") + n;
  }
  return s;
}

}  // namespace tessera::runtime::cuda
