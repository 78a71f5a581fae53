// JIT lifecycle and compile options of the LLVM backend: many compile/unload cycles, concurrent
// compiles, optimisation levels, IR/assembly listings, f64 math through libm, host detection.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "codegen/llvm/compile.h"
#include "test_llvm_util.h"

namespace tessera::codegen::llvm_test {
namespace {

// out[i] = in[i] * scale + offset, with a vectorized main part and a scalar tail.
LoweredFunc affine_func(const std::string& name, double scale, double offset) {
  Var n = ir::size_var("n");
  Buffer in = ir::make_buffer("in", DType::kFloat32, {n});
  Buffer out = ir::make_buffer("out", DType::kFloat32, {n});
  Var io = loop_var("io"), ii = loop_var("ii"), t = loop_var("t");
  Expr blocks = ir::floordiv(n, 8);
  Expr i = io * 8 + ii;
  Stmt main =
      serial(io, blocks, vectorized(ii, 8, store(out, i, ld(in, i) * f32(scale) + f32(offset))));
  Stmt tail = loop(t, blocks * 8, n - blocks * 8, ForKind::kSerial,
                   store(out, t, ld(in, t) * f32(scale) + f32(offset)));
  return make_func(name, {in, out}, {n}, loop::make_seq({main, tail}));
}

void check_affine(const CompiledKernel& k, double scale, double offset) {
  std::vector<float> in(37), out(37);
  for (int j = 0; j < 37; ++j) in[j] = static_cast<float>(j) - 10.5f;
  call(k, {in.data(), out.data()}, {37});
  for (int j = 0; j < 37; ++j) {
    ASSERT_EQ(out[j], in[j] * static_cast<float>(scale) + static_cast<float>(offset)) << j;
  }
}

TEST(LlvmJit, HostCpuIsDetected) {
  const HostCpu& cpu = host_cpu();
  EXPECT_FALSE(cpu.name.empty());
  EXPECT_FALSE(cpu.triple.empty());
  EXPECT_TRUE(cpu.vector_bits == 128 || cpu.vector_bits == 256 || cpu.vector_bits == 512);
  EXPECT_EQ(cpu.has_avx512, cpu.features.find("+avx512f") != std::string::npos);
  EXPECT_EQ(cpu.has_avx2, cpu.features.find("+avx2") != std::string::npos);
  if (cpu.has_avx512) {
    EXPECT_EQ(cpu.vector_bits, 512);
  }
}

// Kernels with the same name compile to distinct symbols; dropping them unloads the code while
// the remaining ones keep working.
TEST(LlvmJit, ManyCompilesAndUnloads) {
  std::vector<std::shared_ptr<CompiledKernel>> kept;
  for (int r = 0; r < 40; ++r) {
    auto k = compile_cpu(affine_func("affine", r, 1.0));
    check_affine(*k, r, 1.0);
    if (r % 10 == 0) kept.push_back(k);  // the others are unloaded right here
  }
  for (size_t j = 0; j < kept.size(); ++j) check_affine(*kept[j], static_cast<double>(j * 10), 1.0);
  EXPECT_NE(kept[0]->symbol(), kept[1]->symbol());
}

TEST(LlvmJit, ConcurrentCompiles) {
  std::vector<std::shared_ptr<CompiledKernel>> ks(4);
  std::vector<std::string> errors(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      try {
        for (int r = 0; r < 3; ++r) ks[t] = compile_cpu(affine_func("conc", t + 2, r));
      } catch (const std::exception& e) {
        errors[t] = e.what();
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) {
    ASSERT_EQ(errors[t], "");
    check_affine(*ks[t], t + 2, 2.0);
  }
}

TEST(LlvmJit, EveryOptLevelGivesTheSameResult) {
  for (int level = 0; level <= 3; ++level) {
    CompileOptions opts;
    opts.opt_level = level;
    opts.keep_ir = true;
    opts.keep_asm = true;
    auto k = compile_cpu(affine_func("levels", 1.5, -2.0), opts);
    check_affine(*k, 1.5, -2.0);
    EXPECT_NE(k->llvm_ir().find("define void @" + k->symbol()), std::string::npos);
    EXPECT_NE(k->assembly().find(k->symbol() + ":"), std::string::npos);
    EXPECT_GT(k->compile_ms(), 0.0);
  }
  // Listings are only kept on request.
  auto plain = compile_cpu(affine_func("plain", 1, 0));
  EXPECT_EQ(plain->llvm_ir(), "");
  EXPECT_EQ(plain->assembly(), "");
}

// f64 math goes through libm per lane; results must match std:: closely.
TEST(LlvmJit, Float64MathUsesLibm) {
  for (bool vec : {true, false}) {
    Buffer X = ir::make_buffer("X", DType::kFloat64, {Expr(16)});
    Buffer out = ir::make_buffer("out", DType::kFloat64, {Expr(6), Expr(16)});
    Var i = loop_var("i");
    Expr x = ld(X, i);
    std::vector<Expr> fs = {
        ir::exp(x),     ir::log(ir::call(ir::CallOp::kAbs, {x})),
        ir::tanh(x),    ir::erf(x),
        ir::sigmoid(x), ir::call(ir::CallOp::kPow, {ir::call(ir::CallOp::kAbs, {x}), x})};
    std::vector<Stmt> stores;
    for (size_t r = 0; r < fs.size(); ++r)
      stores.push_back(store(out, static_cast<int64_t>(r) * 16 + i, fs[r]));
    Stmt body = loop::make_seq(stores);
    auto k = compile_cpu(
        make_func("f64", {X, out}, {}, vec ? vectorized(i, 16, body) : serial(i, 16, body)));
    std::vector<double> xs(16), o(96);
    for (int j = 0; j < 16; ++j) xs[j] = (j - 7.5) * 0.61;
    call(*k, {xs.data(), o.data()}, {});
    for (int j = 0; j < 16; ++j) {
      double x0 = xs[j];
      double want[6] = {std::exp(x0), std::log(std::fabs(x0)), std::tanh(x0),
                        std::erf(x0), 1 / (1 + std::exp(-x0)), std::pow(std::fabs(x0), x0)};
      for (int r = 0; r < 6; ++r) {
        EXPECT_NEAR(o[r * 16 + j], want[r], 1e-14 * (1 + std::fabs(want[r]))) << r << " " << j;
      }
    }
  }
}

}  // namespace
}  // namespace tessera::codegen::llvm_test
