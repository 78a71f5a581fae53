#pragma once
// The CUDA driver API (libcuda) loaded at run time: present wherever an NVIDIA driver is
// installed, absent on CPU-only machines, where Tessera must still build, import and run. Only
// the entry points Tessera calls are declared, with the C ABI of cuda.h (results are ints,
// 0 = CUDA_SUCCESS; handles are opaque pointers; device pointers 64-bit integers).
#include <cstddef>
#include <cstdint>
#include <string>

namespace tessera::runtime::cuda {

struct DriverApi {
  using Context = struct CudaContextOpaque*;
  using Module = struct CudaModuleOpaque*;
  using Function = struct CudaFunctionOpaque*;
  using Stream = struct CudaStreamOpaque*;
  using DevicePtr = unsigned long long;

  int (*Init)(unsigned);
  int (*GetErrorString)(int, const char**);
  int (*DeviceGetCount)(int*);
  int (*DeviceGet)(int*, int);
  int (*DeviceGetName)(char*, int, int);
  int (*DeviceGetAttribute)(int*, int, int);
  int (*DevicePrimaryCtxRetain)(Context*, int);
  int (*CtxSetCurrent)(Context);
  int (*CtxSynchronize)();
  int (*ModuleLoadData)(Module*, const void*);
  int (*ModuleUnload)(Module);
  int (*ModuleGetFunction)(Function*, Module, const char*);
  int (*FuncGetAttribute)(int*, int, Function);
  int (*LaunchKernel)(Function, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                      unsigned, Stream, void**, void**);
  int (*MemAlloc)(DevicePtr*, size_t);
  int (*MemFree)(DevicePtr);
  int (*MemcpyHtoD)(DevicePtr, const void*, size_t);
  int (*MemcpyDtoH)(void*, DevicePtr, size_t);
  int (*StreamSynchronize)(Stream);
};

// cuDeviceGetAttribute / cuFuncGetAttribute codes used here (values of cuda.h's enums).
constexpr int kAttrComputeCapabilityMajor = 75;
constexpr int kAttrComputeCapabilityMinor = 76;
constexpr int kFuncAttrLocalSizeBytes = 3;
constexpr int kFuncAttrNumRegs = 4;

// The API, loaded and initialised (cuInit) on first use; null when libcuda or one of its entry
// points is missing or cuInit fails, with the reason in `*why_not` (when given).
const DriverApi* driver_api(std::string* why_not = nullptr);

// Throws tessera::Error naming `what` and the driver's message when `result` is not 0.
void check_cuda(const DriverApi& api, int result, const char* what);

}  // namespace tessera::runtime::cuda
