// The CUDA runtime module (runtime/cuda/): libraries loaded at run time (absent here, and that
// must not be fatal), compiling to cubins through NVRTC or nvcc with a cache and ptxas's report,
// and launches, which run only where a device exists (the tests skip otherwise).
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "codegen/cuda/emit_cuda.h"
#include "ops/linalg.h"
#include "ops/nn.h"
#include "ops/reference.h"
#include "runtime/cuda/cuda_compile.h"
#include "runtime/cuda/cuda_module.h"
#include "runtime/cuda/dynamic_library.h"
#include "runtime/cuda/gpu_kernel.h"
#include "runtime/cuda/nvrtc_api.h"
#include "runtime/ndarray.h"
#include "schedule/gpu/gpu_schedule.h"
#include "util/check.h"

namespace tessera::runtime::cuda {
namespace {

using ir::Expr;
using ir::Tensor;

bool have_compiler() { return available_cuda_compiler() != CudaCompiler::kNone; }

#define SKIP_WITHOUT_COMPILER() \
  if (!have_compiler()) GTEST_SKIP() << "neither NVRTC nor nvcc: CUDA sources not compiled"

#define SKIP_WITHOUT_DEVICE() \
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device"

const char* kTrivialKernel =
    "extern \"C\" __global__ void twice(float* x) { x[threadIdx.x] *= 2.0f; }\n";

TEST(CudaRuntime, ParsesPtxasReport) {
  const std::string log =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function 'gemm' for 'sm_90'\n"
      "ptxas info    : Function properties for gemm\n"
      "    8 bytes stack frame, 12 bytes spill stores, 20 bytes spill loads\n"
      "ptxas info    : Used 56 registers, used 1 barriers, 16384 bytes smem, 380 bytes cmem[0]\n";
  const PtxasInfo info = parse_ptxas_info(log);
  EXPECT_TRUE(info.found);
  EXPECT_EQ(info.registers, 56);
  EXPECT_EQ(info.shared_bytes, 16384);
  EXPECT_EQ(info.spill_store_bytes, 12);
  EXPECT_EQ(info.spill_load_bytes, 20);
  EXPECT_EQ(info.spill_bytes(), 32);
  EXPECT_EQ(info.stack_bytes, 8);
  EXPECT_FALSE(parse_ptxas_info("nothing to see").found);
}

TEST(CudaRuntime, DynamicLibraryReportsWhatFailed) {
  std::string error;
  EXPECT_EQ(DynamicLibrary::open({"libtessera_no_such_library.so"}, &error), nullptr);
  EXPECT_NE(error.find("libtessera_no_such_library.so"), std::string::npos) << error;
  const auto libm = DynamicLibrary::open({"libtessera_no_such_library.so", "libm.so.6"}, &error);
  ASSERT_NE(libm, nullptr) << error;
  EXPECT_EQ(libm->name(), "libm.so.6");
  EXPECT_NE(libm->symbol("cos"), nullptr);
  EXPECT_EQ(libm->symbol("nvrtcCreateProgram"), nullptr);
}

// NVRTC is used where it loads; where it does not, asking for it fails with the reason, and
// nothing else breaks.
TEST(CudaRuntime, NvrtcLoadsOrSaysWhyNot) {
  std::string why_not;
  const NvrtcApi* api = nvrtc_api(&why_not);
  CudaCompileOptions nvrtc;
  nvrtc.force = CudaCompiler::kNvrtc;
  if (!api) {
    EXPECT_NE(why_not.find("NVRTC not found"), std::string::npos) << why_not;
    EXPECT_NE(available_cuda_compiler(), CudaCompiler::kNvrtc);
    try {
      compile_cuda(kTrivialKernel, nvrtc);
      ADD_FAILURE() << "compiled with an NVRTC that did not load";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("NVRTC not found"), std::string::npos) << e.what();
    }
    return;
  }
  int major = 0, minor = 0;
  EXPECT_EQ(api->Version(&major, &minor), 0);
  const CompiledCuda r = compile_cuda(kTrivialKernel, nvrtc);
  EXPECT_EQ(r.compiler, CudaCompiler::kNvrtc);
  EXPECT_EQ(r.cubin.substr(0, 4),
            "\x7f"
            "ELF");
}

TEST(CudaRuntime, DriverAbsenceIsNotFatal) {
  std::string why_not;
  if (driver_api(&why_not)) GTEST_SKIP() << "a CUDA driver is installed here";
  EXPECT_FALSE(why_not.empty());
  EXPECT_EQ(cuda_device_count(), 0);
  EXPECT_THROW(DeviceBuffer(16), Error);
  EXPECT_THROW(cuda_device_info(0), Error);
}

TEST(CudaRuntime, CompilesToCubinAndCaches) {
  SKIP_WITHOUT_COMPILER();
  const std::string source = std::string(kTrivialKernel) + "// CompilesToCubinAndCaches\n";
  const CudaCompileCounts before = cuda_compile_counts();
  const CompiledCuda first = compile_cuda(source);
  EXPECT_EQ(first.cubin.substr(0, 4),
            "\x7f"
            "ELF")
      << "an ELF cubin";
  EXPECT_FALSE(first.from_cache);
  EXPECT_NE(first.compiler, CudaCompiler::kNone);
  if (first.compiler == CudaCompiler::kNvcc) {
    EXPECT_TRUE(first.ptxas.found) << first.log;
    EXPECT_GT(first.ptxas.registers, 0) << first.log;
  }
  const CompiledCuda second = compile_cuda(source);
  EXPECT_TRUE(second.from_cache);
  EXPECT_EQ(second.cubin, first.cubin);
  EXPECT_EQ(second.source_hash, first.source_hash);
  const CudaCompileCounts after = cuda_compile_counts();
  EXPECT_EQ(after.compiles, before.compiles + 1);
  EXPECT_EQ(after.cache_hits, before.cache_hits + 1);
  // The architecture is part of the key.
  EXPECT_NE(cuda_source_hash(source, "sm_80", first.compiler),
            cuda_source_hash(source, "sm_90", first.compiler));
}

TEST(CudaRuntime, CompileErrorsCarryTheLog) {
  SKIP_WITHOUT_COMPILER();
  try {
    compile_cuda("extern \"C\" __global__ void broken(float* x) { x[0] = undeclared; }\n");
    ADD_FAILURE() << "a broken kernel compiled";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("undeclared"), std::string::npos) << e.what();
  }
  CudaCompileOptions bad;
  bad.arch = "sm_90; rm -rf /";
  EXPECT_THROW(compile_cuda(kTrivialKernel, bad), Error);
}

// The bar: construct's GEMM 2048 choice compiles without spills (today the GPU default
// schedule stands in for construct's choice).
TEST(CudaRuntime, Gemm2048DefaultScheduleDoesNotSpill) {
  SKIP_WITHOUT_COMPILER();
  Tensor a = ir::placeholder("A", {Expr(2048), Expr(2048)});
  Tensor b = ir::placeholder("B", {Expr(2048), Expr(2048)});
  const CompiledGpuKernel k =
      compile_gpu_kernel(schedule::gpu::lower_gpu({ops::matmul(a, b)}, {a, b}, "gemm2048"));
  const LaunchShape shape = launch_shape(k, {});
  EXPECT_EQ(shape.grid[0], 32 * 32);
  EXPECT_EQ(shape.block[0], 256);
  if (!k.compiled.ptxas.found) GTEST_SKIP() << "no ptxas report from " << k.compiled.log;
  EXPECT_EQ(k.compiled.ptxas.spill_bytes(), 0) << k.compiled.log;
  EXPECT_LE(k.compiled.ptxas.registers, 128) << k.compiled.log;
}

// On a device: schedules run and match the reference.
void expect_device_matches_reference(const std::vector<Tensor>& outs,
                                     const std::vector<Tensor>& ins, const std::string& name) {
  const CompiledGpuKernel k = compile_gpu_kernel(schedule::gpu::lower_gpu(outs, ins, name));
  const CudaKernel loaded(k.compiled.cubin, name);
  std::map<const ir::TensorNode*, NDArray> inputs;
  std::vector<std::unique_ptr<DeviceBuffer>> device;
  std::vector<DriverApi::DevicePtr> ptrs;
  auto shape_of = [](const Tensor& t) {
    std::vector<int64_t> s;
    for (const Expr& d : t->shape) s.push_back(d->int_value);
    return s;
  };
  for (size_t i = 0; i < ins.size(); ++i) {
    NDArray a = NDArray::random(ins[i]->dtype, shape_of(ins[i]), 3 + i);
    device.push_back(std::make_unique<DeviceBuffer>(a.nbytes()));
    device.back()->copy_from_host(a.data(), a.nbytes());
    ptrs.push_back(device.back()->ptr());
    inputs[ins[i].get()] = std::move(a);
  }
  std::vector<NDArray> got;
  for (const Tensor& t : outs) {
    got.emplace_back(t->dtype, shape_of(t));
    device.push_back(std::make_unique<DeviceBuffer>(got.back().nbytes()));
    ptrs.push_back(device.back()->ptr());
  }
  run_gpu_kernel(k, loaded, ptrs, {});
  synchronize();
  const std::vector<NDArray> want = ops::run_reference(outs, inputs, {});
  for (size_t o = 0; o < outs.size(); ++o) {
    device[ins.size() + o]->copy_to_host(got[o].data(), got[o].nbytes());
    for (int64_t i = 0; i < got[o].numel(); ++i) {
      const float w = want[o].f32()[i];
      ASSERT_NEAR(got[o].f32()[i], w, 1e-4 * (1 + std::fabs(w))) << name << " at " << i;
    }
  }
}

TEST(CudaRuntime, SchedulesRunOnDevice) {
  SKIP_WITHOUT_DEVICE();
  SKIP_WITHOUT_COMPILER();
  Tensor a = ir::placeholder("A", {Expr(37), Expr(29)});
  Tensor b = ir::placeholder("B", {Expr(29), Expr(53)});
  expect_device_matches_reference({ops::matmul(a, b)}, {a, b}, "mm_odd");
  Tensor x = ir::placeholder("x", {Expr(9), Expr(300)});
  expect_device_matches_reference({ops::softmax(x)}, {x}, "softmax");
}

}  // namespace
}  // namespace tessera::runtime::cuda
