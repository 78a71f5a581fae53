#include "runtime/cuda/driver_api.h"

#include <memory>
#include <vector>

#include "runtime/cuda/dynamic_library.h"
#include "util/check.h"

namespace tessera::runtime::cuda {

namespace {

constexpr const char* kDriverEnv = "TESSERA_CUDA_DRIVER_LIBRARY";

struct Loaded {
  std::unique_ptr<DynamicLibrary> lib;
  DriverApi api{};
  bool ok = false;
  std::string why_not;
};

Loaded load() {
  Loaded l;
  l.lib = DynamicLibrary::open(library_candidates(kDriverEnv, {"libcuda.so.1", "libcuda.so"}),
                               &l.why_not);
  if (!l.lib) {
    l.why_not = "CUDA driver not found (" + l.why_not + ")";
    return l;
  }
  const DynamicLibrary& d = *l.lib;
  DriverApi& a = l.api;
  std::string& w = l.why_not;
  // Entry points with a _v2 symbol are bound by it: the unversioned ones keep 32-bit sizes.
  const bool bound =
      d.bind("cuInit", &a.Init, &w) && d.bind("cuGetErrorString", &a.GetErrorString, &w) &&
      d.bind("cuDeviceGetCount", &a.DeviceGetCount, &w) &&
      d.bind("cuDeviceGet", &a.DeviceGet, &w) && d.bind("cuDeviceGetName", &a.DeviceGetName, &w) &&
      d.bind("cuDeviceGetAttribute", &a.DeviceGetAttribute, &w) &&
      d.bind("cuDevicePrimaryCtxRetain", &a.DevicePrimaryCtxRetain, &w) &&
      d.bind("cuCtxSetCurrent", &a.CtxSetCurrent, &w) &&
      d.bind("cuCtxSynchronize", &a.CtxSynchronize, &w) &&
      d.bind("cuModuleLoadData", &a.ModuleLoadData, &w) &&
      d.bind("cuModuleUnload", &a.ModuleUnload, &w) &&
      d.bind("cuModuleGetFunction", &a.ModuleGetFunction, &w) &&
      d.bind("cuFuncGetAttribute", &a.FuncGetAttribute, &w) &&
      d.bind("cuLaunchKernel", &a.LaunchKernel, &w) && d.bind("cuMemAlloc_v2", &a.MemAlloc, &w) &&
      d.bind("cuMemFree_v2", &a.MemFree, &w) && d.bind("cuMemcpyHtoD_v2", &a.MemcpyHtoD, &w) &&
      d.bind("cuMemcpyDtoH_v2", &a.MemcpyDtoH, &w) &&
      d.bind("cuStreamSynchronize", &a.StreamSynchronize, &w);
  if (!bound) return l;
  if (const int rc = a.Init(0); rc != 0) {
    const char* msg = nullptr;
    a.GetErrorString(rc, &msg);
    w = "cuInit failed: " + std::string(msg ? msg : std::to_string(rc));
    return l;
  }
  l.ok = true;
  return l;
}

}  // namespace

const DriverApi* driver_api(std::string* why_not) {
  static const Loaded loaded = load();  // thread-safe once
  if (!loaded.ok && why_not) *why_not = loaded.why_not;
  return loaded.ok ? &loaded.api : nullptr;
}

void check_cuda(const DriverApi& api, int result, const char* what) {
  if (result == 0) return;
  const char* msg = nullptr;
  api.GetErrorString(result, &msg);
  TESSERA_FAIL() << "CUDA: " << what << " failed: " << (msg ? msg : std::to_string(result));
}

}  // namespace tessera::runtime::cuda
