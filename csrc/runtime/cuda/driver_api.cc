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

template <typename F>
bool bind(const DynamicLibrary& lib, const char* name, F* out, std::string* why_not) {
  *out = reinterpret_cast<F>(lib.symbol(name));
  if (!*out) *why_not = lib.name() + " has no " + name;
  return *out != nullptr;
}

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
      bind(d, "cuInit", &a.Init, &w) && bind(d, "cuGetErrorString", &a.GetErrorString, &w) &&
      bind(d, "cuDeviceGetCount", &a.DeviceGetCount, &w) &&
      bind(d, "cuDeviceGet", &a.DeviceGet, &w) &&
      bind(d, "cuDeviceGetName", &a.DeviceGetName, &w) &&
      bind(d, "cuDeviceGetAttribute", &a.DeviceGetAttribute, &w) &&
      bind(d, "cuDevicePrimaryCtxRetain", &a.DevicePrimaryCtxRetain, &w) &&
      bind(d, "cuCtxSetCurrent", &a.CtxSetCurrent, &w) &&
      bind(d, "cuCtxSynchronize", &a.CtxSynchronize, &w) &&
      bind(d, "cuModuleLoadData", &a.ModuleLoadData, &w) &&
      bind(d, "cuModuleUnload", &a.ModuleUnload, &w) &&
      bind(d, "cuModuleGetFunction", &a.ModuleGetFunction, &w) &&
      bind(d, "cuFuncGetAttribute", &a.FuncGetAttribute, &w) &&
      bind(d, "cuLaunchKernel", &a.LaunchKernel, &w) && bind(d, "cuMemAlloc_v2", &a.MemAlloc, &w) &&
      bind(d, "cuMemFree_v2", &a.MemFree, &w) && bind(d, "cuMemcpyHtoD_v2", &a.MemcpyHtoD, &w) &&
      bind(d, "cuMemcpyDtoH_v2", &a.MemcpyDtoH, &w) &&
      bind(d, "cuStreamSynchronize", &a.StreamSynchronize, &w);
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
