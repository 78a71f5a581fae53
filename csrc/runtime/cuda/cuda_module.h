#pragma once
// Devices, device memory and loaded kernels through the driver API (driver_api.h). Everything
// here needs a device: without one, cuda_device_count() is 0 and the constructors throw.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/cuda/driver_api.h"

namespace tessera::runtime::cuda {

// Devices the driver sees; 0 without a driver (never throws).
int cuda_device_count();

struct CudaDeviceInfo {
  int ordinal = 0;
  std::string name;
  int major = 0, minor = 0;  // compute capability
  std::string arch() const;  // "sm_90"
};
CudaDeviceInfo cuda_device_info(int ordinal = 0);

// Makes the primary context of device `ordinal` current on the calling thread (the context torch
// uses too, so pointers from its allocator are valid in it).
void use_device(int ordinal);

// Device memory owned by the object (tests; the runtime takes torch's allocations instead).
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes, int ordinal = 0);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void copy_from_host(const void* src, size_t bytes);
  void copy_to_host(void* dst, size_t bytes) const;
  DriverApi::DevicePtr ptr() const { return ptr_; }

 private:
  const DriverApi& api_;
  DriverApi::DevicePtr ptr_ = 0;
};

// One kernel of a cubin loaded into device `ordinal`'s primary context.
class CudaKernel {
 public:
  CudaKernel(const std::string& cubin, const std::string& function, int ordinal = 0);
  ~CudaKernel();
  CudaKernel(const CudaKernel&) = delete;
  CudaKernel& operator=(const CudaKernel&) = delete;

  // Launches on `stream` (null: the legacy default stream) without waiting. Arguments follow
  // emit_cuda's ABI: one device pointer per buffer, then one 64-bit integer per size.
  void launch(const std::array<int64_t, 3>& grid, const std::array<int64_t, 3>& block,
              const std::vector<DriverApi::DevicePtr>& buffers, const std::vector<int64_t>& sizes,
              DriverApi::Stream stream = nullptr) const;

  int registers() const;    // per thread, as loaded
  int local_bytes() const;  // per thread (spills and local arrays)

 private:
  const DriverApi& api_;
  DriverApi::Module module_ = nullptr;
  DriverApi::Function function_ = nullptr;
};

// Waits for `stream` (null: the legacy default stream).
void synchronize(DriverApi::Stream stream = nullptr);

}  // namespace tessera::runtime::cuda
