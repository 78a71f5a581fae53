#pragma once
// A loop-IR GPU kernel taken to the device: CUDA C (codegen/cuda/emit_cuda.h), a cubin
// (cuda_compile.h), the launch shape for given sizes, and the launch itself (cuda_module.h).
// Compiling needs only a compiler (NVRTC or nvcc); running needs a device.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "codegen/cuda/launch_dims.h"
#include "loop/stmt.h"
#include "runtime/cuda/cuda_compile.h"
#include "runtime/cuda/cuda_module.h"

namespace tessera::runtime::cuda {

struct CompiledGpuKernel {
  loop::LoweredFunc func;
  std::string source;  // the CUDA C
  CompiledCuda compiled;
  codegen::cuda::LaunchDims dims;
};

// Emits and compiles `f` (throws tessera::Error when either fails).
CompiledGpuKernel compile_gpu_kernel(const loop::LoweredFunc& f,
                                     const CudaCompileOptions& options = {});

struct LaunchShape {
  std::array<int64_t, 3> grid{1, 1, 1};
  std::array<int64_t, 3> block{1, 1, 1};
  bool empty() const;  // some extent is 0: nothing to launch
};

// The launch shape for size values `sizes` (ABI order of func.size_vars).
LaunchShape launch_shape(const CompiledGpuKernel& k, const std::vector<int64_t>& sizes);

// Launches `k` (loaded as `loaded`) on `stream` over device buffers in ABI order. When the
// kernel has a status word and `buffers` leaves it out, one is allocated, the launch waited for,
// and a non-zero status raised as tessera::Error. An empty launch shape launches nothing.
void run_gpu_kernel(const CompiledGpuKernel& k, const CudaKernel& loaded,
                    const std::vector<DriverApi::DevicePtr>& buffers,
                    const std::vector<int64_t>& sizes, DriverApi::Stream stream = nullptr);

}  // namespace tessera::runtime::cuda
