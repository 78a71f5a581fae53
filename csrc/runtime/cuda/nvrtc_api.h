#pragma once
// NVRTC (CUDA's run-time compiler) loaded at run time: the library from the CUDA toolkit or from
// the nvidia-cuda-nvrtc wheel, named by TESSERA_NVRTC_LIBRARY or found on the loader's path.
// Only the entry points Tessera calls are declared here, with the C ABI of nvrtc.h (results
// are ints, 0 = NVRTC_SUCCESS), so no CUDA header is needed to build.
#include <cstddef>
#include <string>

namespace tessera::runtime::cuda {

struct NvrtcApi {
  using Program = struct NvrtcProgramOpaque*;
  const char* (*GetErrorString)(int);
  int (*Version)(int*, int*);
  int (*CreateProgram)(Program*, const char*, const char*, int, const char* const*,
                       const char* const*);
  int (*CompileProgram)(Program, int, const char* const*);
  int (*GetCUBINSize)(Program, size_t*);
  int (*GetCUBIN)(Program, char*);
  int (*GetProgramLogSize)(Program, size_t*);
  int (*GetProgramLog)(Program, char*);
  int (*DestroyProgram)(Program*);
};

// The API, loaded on first use; null when the library or one of its entry points is missing,
// with the reason in `*why_not` (when given).
const NvrtcApi* nvrtc_api(std::string* why_not = nullptr);

// The library names tried, in order (the environment variable's path first when set).
std::string nvrtc_search_text();

}  // namespace tessera::runtime::cuda
