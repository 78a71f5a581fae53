#include "runtime/cuda/gpu_kernel.h"

#include "codegen/cuda/emit_cuda.h"
#include "ir/eval.h"
#include "util/check.h"

namespace tessera::runtime::cuda {

CompiledGpuKernel compile_gpu_kernel(const loop::LoweredFunc& f,
                                     const CudaCompileOptions& options) {
  CompiledGpuKernel k;
  k.func = f;
  k.dims = codegen::cuda::launch_dims(f);
  k.source = codegen::cuda::emit_cuda(f);
  k.compiled = compile_cuda(k.source, options);
  return k;
}

bool LaunchShape::empty() const {
  for (int d = 0; d < 3; ++d) {
    if (grid[d] == 0 || block[d] == 0) return true;
  }
  return false;
}

LaunchShape launch_shape(const CompiledGpuKernel& k, const std::vector<int64_t>& sizes) {
  TESSERA_CHECK(sizes.size() == k.func.size_vars.size())
      << "launch_shape: " << k.func.name << " takes " << k.func.size_vars.size() << " sizes";
  ir::EvalEnv env;
  for (size_t i = 0; i < sizes.size(); ++i) {
    env.vars[k.func.size_vars[i].get()] = ir::Scalar::of_int(sizes[i]);
  }
  LaunchShape s;
  for (int d = 0; d < 3; ++d) {
    s.grid[d] = ir::evaluate(k.dims.grid[d], env).i;
    s.block[d] = ir::evaluate(k.dims.block[d], env).i;
  }
  return s;
}

void run_gpu_kernel(const CompiledGpuKernel& k, const CudaKernel& loaded,
                    const std::vector<DriverApi::DevicePtr>& buffers,
                    const std::vector<int64_t>& sizes, DriverApi::Stream stream) {
  const LaunchShape shape = launch_shape(k, sizes);
  if (shape.empty()) return;
  const size_t args = k.func.args.size();
  const bool add_status = k.func.has_status && buffers.size() + 1 == args;
  TESSERA_CHECK(buffers.size() == args || add_status)
      << "run_gpu_kernel: " << k.func.name << " takes " << args << " buffers, got "
      << buffers.size();
  if (!add_status) return loaded.launch(shape.grid, shape.block, buffers, sizes, stream);
  DeviceBuffer status(sizeof(int32_t));
  const int32_t zero = 0;
  status.copy_from_host(&zero, sizeof(zero));
  std::vector<DriverApi::DevicePtr> all = buffers;
  all.push_back(status.ptr());
  loaded.launch(shape.grid, shape.block, all, sizes, stream);
  synchronize(stream);
  int32_t value = 0;
  status.copy_to_host(&value, sizeof(value));
  TESSERA_CHECK(value == 0) << "kernel " << k.func.name << " failed at run time (status " << value
                            << ": an integer division by zero)";
}

}  // namespace tessera::runtime::cuda
