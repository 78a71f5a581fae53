#include "runtime/cuda/cuda_module.h"

#include "util/check.h"

namespace tessera::runtime::cuda {

namespace {

const DriverApi& api_or_throw() {
  std::string why_not;
  const DriverApi* api = driver_api(&why_not);
  TESSERA_CHECK(api) << "CUDA: " << why_not;
  return *api;
}

// CUDA's launch dimensions are 32-bit and positive.
unsigned launch_dim(int64_t v, const char* what) {
  TESSERA_CHECK(v >= 1 && v <= 0x7fffffff) << "CUDA launch: " << what << " dimension " << v;
  return static_cast<unsigned>(v);
}

}  // namespace

int cuda_device_count() {
  const DriverApi* api = driver_api();
  int n = 0;
  if (!api || api->DeviceGetCount(&n) != 0) return 0;
  return n;
}

std::string CudaDeviceInfo::arch() const {
  return "sm_" + std::to_string(major) + std::to_string(minor);
}

CudaDeviceInfo cuda_device_info(int ordinal) {
  const DriverApi& api = api_or_throw();
  int dev = 0;
  check_cuda(api, api.DeviceGet(&dev, ordinal), "cuDeviceGet");
  CudaDeviceInfo info;
  info.ordinal = ordinal;
  char name[256] = {};
  check_cuda(api, api.DeviceGetName(name, sizeof(name), dev), "cuDeviceGetName");
  info.name = name;
  check_cuda(api, api.DeviceGetAttribute(&info.major, kAttrComputeCapabilityMajor, dev),
             "cuDeviceGetAttribute");
  check_cuda(api, api.DeviceGetAttribute(&info.minor, kAttrComputeCapabilityMinor, dev),
             "cuDeviceGetAttribute");
  return info;
}

void use_device(int ordinal) {
  const DriverApi& api = api_or_throw();
  int dev = 0;
  check_cuda(api, api.DeviceGet(&dev, ordinal), "cuDeviceGet");
  DriverApi::Context ctx = nullptr;
  check_cuda(api, api.DevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  check_cuda(api, api.CtxSetCurrent(ctx), "cuCtxSetCurrent");
}

DeviceBuffer::DeviceBuffer(size_t bytes, int ordinal) : api_(api_or_throw()) {
  use_device(ordinal);
  check_cuda(api_, api_.MemAlloc(&ptr_, bytes == 0 ? 1 : bytes), "cuMemAlloc");
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) api_.MemFree(ptr_);
}

void DeviceBuffer::copy_from_host(const void* src, size_t bytes) {
  check_cuda(api_, api_.MemcpyHtoD(ptr_, src, bytes), "cuMemcpyHtoD");
}

void DeviceBuffer::copy_to_host(void* dst, size_t bytes) const {
  check_cuda(api_, api_.MemcpyDtoH(dst, ptr_, bytes), "cuMemcpyDtoH");
}

CudaKernel::CudaKernel(const std::string& cubin, const std::string& function, int ordinal)
    : api_(api_or_throw()) {
  use_device(ordinal);
  check_cuda(api_, api_.ModuleLoadData(&module_, cubin.data()), "cuModuleLoadData");
  const int rc = api_.ModuleGetFunction(&function_, module_, function.c_str());
  if (rc != 0) {
    api_.ModuleUnload(module_);
    check_cuda(api_, rc, ("cuModuleGetFunction(" + function + ")").c_str());
  }
}

CudaKernel::~CudaKernel() {
  if (module_) api_.ModuleUnload(module_);
}

void CudaKernel::launch(const std::array<int64_t, 3>& grid, const std::array<int64_t, 3>& block,
                        const std::vector<DriverApi::DevicePtr>& buffers,
                        const std::vector<int64_t>& sizes, DriverApi::Stream stream) const {
  // cuLaunchKernel takes a pointer to each argument's value.
  std::vector<DriverApi::DevicePtr> ptrs = buffers;
  std::vector<long long> size_values(sizes.begin(), sizes.end());
  std::vector<void*> args;
  for (DriverApi::DevicePtr& p : ptrs) args.push_back(&p);
  for (long long& s : size_values) args.push_back(&s);
  check_cuda(api_,
             api_.LaunchKernel(function_, launch_dim(grid[0], "grid"), launch_dim(grid[1], "grid"),
                               launch_dim(grid[2], "grid"), launch_dim(block[0], "block"),
                               launch_dim(block[1], "block"), launch_dim(block[2], "block"),
                               /*sharedMemBytes=*/0, stream, args.data(), nullptr),
             "cuLaunchKernel");
}

int CudaKernel::registers() const {
  int v = 0;
  check_cuda(api_, api_.FuncGetAttribute(&v, kFuncAttrNumRegs, function_), "cuFuncGetAttribute");
  return v;
}

int CudaKernel::local_bytes() const {
  int v = 0;
  check_cuda(api_, api_.FuncGetAttribute(&v, kFuncAttrLocalSizeBytes, function_),
             "cuFuncGetAttribute");
  return v;
}

void synchronize(DriverApi::Stream stream) {
  const DriverApi& api = api_or_throw();
  check_cuda(api, api.StreamSynchronize(stream), "cuStreamSynchronize");
}

}  // namespace tessera::runtime::cuda
