// The CUDA C emitter (codegen/cuda/emit_cuda.h) on hand-built loop IR: GPU-only statements
// (barrier, shared memory), every expression kind and dtype it translates, what it refuses, and
// the CPU side's refusal of GPU constructs.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "codegen/cuda/emit_cuda.h"
#include "codegen/cuda/launch_dims.h"
#include "cuda_test_util.h"
#include "loop/interpreter.h"
#include "loop/printer.h"
#include "test_llvm_util.h"
#include "util/check.h"

namespace tessera::codegen {
namespace {

using cuda::emit_cuda;
using cuda_test::contains;
using ir::Buffer;
using ir::DType;
using ir::Expr;
using ir::Var;
using llvm_test::ld;
using llvm_test::make_func;
using llvm_test::store;
using loop::ForKind;
using loop::Stmt;

constexpr int64_t kBlock = 128;  // threads per block of the hand-built kernels

Stmt gpu_loop(const Var& v, Expr extent, ForKind kind, Stmt body) {
  return loop::make_for(v, ir::int_imm(0), std::move(extent), kind, std::move(body));
}

// Reverses each block's slice of `in` through shared memory: a barrier separates the writes of
// the tile from reads of other threads' elements.
loop::LoweredFunc block_reverse() {
  Buffer in = ir::make_buffer("in", DType::kFloat32, {Expr(4 * kBlock)});
  Buffer out = ir::make_buffer("out", DType::kFloat32, {Expr(4 * kBlock)});
  Buffer tile = ir::make_buffer("tile", DType::kFloat32, {Expr(kBlock)}, ir::MemScope::kShared);
  Var bx = ir::var("bx", 0, 3), tx = ir::var("tx", 0, kBlock - 1);
  Expr base = bx * Expr(kBlock);
  Stmt body = loop::make_seq({store(tile, tx, ld(in, base + tx)), loop::make_barrier(),
                              store(out, base + tx, ld(tile, Expr(kBlock - 1) - tx))});
  Stmt threads = gpu_loop(tx, Expr(kBlock), ForKind::kGpuThreadX, loop::make_allocate(tile, body));
  return make_func("block_reverse", {in, out}, {},
                   gpu_loop(bx, Expr(4), ForKind::kGpuBlockX, threads));
}

TEST(CudaCodegen, SharedMemoryAndBarrier) {
  loop::LoweredFunc f = block_reverse();
  EXPECT_TRUE(contains(loop::to_string(f), "barrier")) << loop::to_string(f);
  EXPECT_TRUE(contains(loop::to_string(f), "(shared)")) << loop::to_string(f);
  const std::string src = emit_cuda(f);
  EXPECT_TRUE(contains(src, "__shared__ float tile[128];")) << src;
  EXPECT_TRUE(contains(src, "__syncthreads();")) << src;
  const cuda::LaunchDims d = cuda::launch_dims(f);
  EXPECT_TRUE(d.grid[0]->is_const_int(4) && d.block[0]->is_const_int(kBlock));
  EXPECT_TRUE(d.grid[1]->is_const_int(1) && d.block[2]->is_const_int(1));
  TESSERA_EXPECT_NVCC_COMPILES(src, "block_reverse");
}

TEST(CudaCodegen, SerialInterpreterRefusesBarrier) {
  // Running threads one after another would read tile elements no thread has written yet.
  loop::LoweredFunc f = block_reverse();
  std::vector<float> in(4 * kBlock), out(4 * kBlock);
  EXPECT_THROW(loop::interpret(f, {in.data(), out.data()}, {}), Error);
}

TEST(CudaCodegen, GpuInterpreterRunsThreadsThroughBarriers) {
  loop::LoweredFunc f = block_reverse();
  std::vector<float> in(4 * kBlock), out(4 * kBlock, -1.0f);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i);
  loop::interpret_gpu(f, {in.data(), out.data()}, {});
  for (int64_t b = 0; b < 4; ++b) {
    for (int64_t t = 0; t < kBlock; ++t) {
      ASSERT_EQ(out[b * kBlock + t], in[b * kBlock + kBlock - 1 - t])
          << "block " << b << " thread " << t;
    }
  }
}

TEST(CudaCodegen, GpuInterpreterReportsDivergentBarrier) {
  // Half the threads skip the barrier: an error, not a hang.
  Buffer out = ir::make_buffer("out", DType::kFloat32, {Expr(kBlock)});
  Var tx = ir::var("tx", 0, kBlock - 1);
  Stmt body = loop::make_seq({loop::make_if(ir::lt(tx, Expr(kBlock / 2)), loop::make_barrier()),
                              store(out, tx, Expr(1.0))});
  auto f =
      make_func("divergent", {out}, {}, gpu_loop(tx, Expr(kBlock), ForKind::kGpuThreadX, body));
  std::vector<float> data(kBlock);
  EXPECT_THROW(loop::interpret_gpu(f, {data.data()}, {}), Error);
}

TEST(CudaCodegen, CpuCodegenRefusesBarrierAndSharedScope) {
  Buffer out = ir::make_buffer("out", DType::kFloat32, {Expr(4)});
  Buffer tmp = ir::make_buffer("tmp", DType::kFloat32, {Expr(4)}, ir::MemScope::kShared);
  Var i = llvm_test::loop_var("i");
  auto with_barrier = make_func("b", {out}, {}, loop::make_barrier());
  auto with_shared = make_func(
      "s", {out}, {}, loop::make_allocate(tmp, llvm_test::serial(i, 4, store(out, i, ld(tmp, i)))));
  EXPECT_THROW(compile_cpu(with_barrier), Error);
  EXPECT_THROW(compile_cpu(with_shared), Error);
}

// Every expression kind the emitter translates, over int32, int64, bool, float and double
// buffers, serial, unrolled and vectorized loops, lets and an else branch.
TEST(CudaCodegen, ExpressionKindsAndDtypesCompile) {
  Buffer fa = ir::make_buffer("fa", DType::kFloat32, {Expr(64)});
  Buffer da = ir::make_buffer("da", DType::kFloat64, {Expr(64)});
  Buffer ia = ir::make_buffer("ia", DType::kInt32, {Expr(64)});
  Buffer la = ir::make_buffer("la", DType::kInt64, {Expr(64)});
  Buffer ba = ir::make_buffer("ba", DType::kBool, {Expr(64)});
  Buffer reg = ir::make_buffer("acc", DType::kFloat32, {Expr(4)}, ir::MemScope::kRegister);
  Var n = ir::size_var("n", 1, 64);
  Var tx = ir::var("tx", 0, 63), j = llvm_test::loop_var("j"), k = llvm_test::loop_var("k");
  Var t = ir::var("t", ir::kNoLowerBound, ir::kNoUpperBound, DType::kFloat32);
  Expr x = ld(fa, tx), d = ld(da, tx), i32 = ld(ia, tx), i64 = ld(la, tx), b = ld(ba, tx);
  Expr one32 = ir::int_imm(1, DType::kInt32);
  std::vector<Stmt> s;
  s.push_back(store(fa, tx, ir::div(ir::exp(x) + ir::log(x) * ir::tanh(x), ir::sqrt(x))));
  s.push_back(store(fa, tx,
                    ir::call(ir::CallOp::kPow, {x, ir::float_imm(2.5)}) +
                        ir::call(ir::CallOp::kRsqrt, {x}) + ir::sigmoid(x) +
                        ir::call(ir::CallOp::kFloor, {x}) - ir::call(ir::CallOp::kCeil, {x}) +
                        ir::call(ir::CallOp::kAbs, {x}) + ir::erf(x)));
  s.push_back(store(da, tx,
                    ir::max(ir::min(d, ir::float_imm(1e300, DType::kFloat64)), ir::exp(d)) *
                        ir::call(ir::CallOp::kPow, {d, ir::float_imm(0.5, DType::kFloat64)})));
  s.push_back(store(ia, tx,
                    ir::floordiv(i32, ir::int_imm(-3, DType::kInt32)) * i32 +
                        ir::floormod(i32, ir::int_imm(7, DType::kInt32)) - one32));
  s.push_back(store(
      la, tx,
      ir::select(ir::logical_and(b, ir::lt(i64, n)), ir::max(i64, n), ir::cast(DType::kInt64, x))));
  s.push_back(store(ba, tx, ir::logical_or(ir::logical_not(b), ir::ne(x, ir::float_imm(0.0)))));
  s.push_back(store(fa, tx,
                    ir::select(b, ir::float_imm(std::numeric_limits<double>::infinity()),
                               ir::float_imm(std::nan("")))));
  s.push_back(loop::make_if(ir::gt(i32, one32), store(ba, tx, ir::cast(DType::kBool, i32)),
                            store(ba, tx, b + b)));
  Stmt fill = llvm_test::vectorized(k, 4, store(reg, k, ir::cast(DType::kFloat32, k)));
  Stmt sum = llvm_test::unrolled(k, 4, store(fa, tx, ld(fa, tx) + ld(reg, k)));
  s.push_back(loop::make_allocate(reg, loop::make_seq({fill, sum})));
  s.push_back(llvm_test::serial(
      j, n, loop::make_let(t, x * ir::cast(DType::kFloat32, j), store(fa, tx, t))));
  loop::LoweredFunc f = make_func("kinds", {fa, da, ia, la, ba}, {n},
                                  gpu_loop(tx, Expr(64), ForKind::kGpuThreadX, loop::make_seq(s)));
  const std::string src = emit_cuda(f);
  EXPECT_TRUE(contains(src, "unsigned char* ba")) << "bools are stored as bytes:\n" << src;
  EXPECT_TRUE(contains(src, "#pragma unroll")) << src;
  // Division of a value of unknown sign needs the floor fix-up helpers.
  // (ia[tx] is read four times: it is bound to a constant first.)
  EXPECT_TRUE(contains(src, "tessera_floordiv(") && contains(src, ", (-3))")) << src;
  EXPECT_TRUE(contains(src, "tessera_floormod(") && contains(src, ", 7)")) << src;
  EXPECT_TRUE(contains(src, "__int_as_float(0x7f800000u)")) << "infinity:\n" << src;
  TESSERA_EXPECT_NVCC_COMPILES(src, "kinds");
}

// Equal subexpressions (equal by structure, not only shared nodes, as inlining makes them) are
// computed once: a chain of 20 levels, each reading the previous level twice, prints in a few
// kilobytes instead of 2^20 copies, also under a select's branch, which gets an if/else scope.
// A load used only under a light branch stays in the select (bound before it, it would read out
// of bounds where the branch is not taken), and a heavy branch's loads stay inside its if.
TEST(CudaCodegen, SharedSubexpressionsAreBoundOnce) {
  Buffer fa = ir::make_buffer("fa", DType::kFloat32, {Expr(64)});
  Var tx = ir::var("tx", 0, 63);
  auto chain = [&](Expr v, int depth) {
    for (int d = 0; d < depth; ++d) {
      // Two structurally equal, separately built operands.
      v = ir::exp(v * ir::float_imm(0.5)) + ir::exp(v * ir::float_imm(0.5));
    }
    return v;
  };
  Expr light = ir::select(ir::lt(tx, Expr(32)), ld(fa, tx + Expr(32)) * ld(fa, tx + Expr(32)),
                          ir::float_imm(0.0));
  Expr heavy =
      ir::select(ir::lt(tx, Expr(48)), chain(ld(fa, tx + Expr(16)), 20), ir::float_imm(1.0));
  loop::LoweredFunc f = make_func("chain", {fa}, {},
                                  gpu_loop(tx, Expr(64), ForKind::kGpuThreadX,
                                           store(fa, tx, chain(ld(fa, tx), 20) + light + heavy)));
  const std::string src = emit_cuda(f);
  EXPECT_LT(src.size(), 20000u) << src.substr(0, 4000);
  EXPECT_TRUE(contains(src, "const float t")) << src;
  EXPECT_FALSE(contains(src, "= fa[(tx + 32")) << src;
  EXPECT_TRUE(contains(src, "? (fa[(tx + 32")) << src;
  const size_t branch = src.find("if ((tx < 48");
  ASSERT_NE(branch, std::string::npos) << src;
  EXPECT_GT(src.find("fa[(tx + 16"), branch) << src;
  TESSERA_EXPECT_NVCC_COMPILES(src, "chain");
}

TEST(CudaCodegen, RefusesCpuConstructsAndUnsizedAllocations) {
  Buffer out = ir::make_buffer("out", DType::kFloat32, {Expr(8)});
  Var i = llvm_test::loop_var("i");
  Var n = ir::size_var("n", 1, 8);
  auto par = make_func("par", {out}, {}, llvm_test::parallel(i, Expr(8), store(out, i, Expr(1.0))));
  EXPECT_THROW(emit_cuda(par), Error);
  Buffer heap = ir::make_buffer("heap", DType::kFloat32, {Expr(8)}, ir::MemScope::kHeap);
  auto heap_f = make_func("heap_f", {out}, {}, loop::make_allocate(heap, loop::make_nop()));
  EXPECT_THROW(emit_cuda(heap_f), Error);
  Buffer dyn = ir::make_buffer("dyn", DType::kFloat32, {n}, ir::MemScope::kShared);
  auto dyn_f = make_func("dyn_f", {out}, {n}, loop::make_allocate(dyn, loop::make_nop()));
  EXPECT_THROW(emit_cuda(dyn_f), Error);
  Buffer half = ir::make_buffer("half", DType::kFloat16, {Expr(8)});
  auto half_f =
      make_func("half_f", {half}, {}, store(half, Expr(0), ir::float_imm(1, DType::kFloat16)));
  EXPECT_THROW(emit_cuda(half_f), Error);
}

TEST(CudaCodegen, LaunchDimsRejectInconsistentGpuLoops) {
  Buffer out = ir::make_buffer("out", DType::kFloat32, {Expr(64)});
  Var a = ir::var("a", 0, 63), b = ir::var("b", 0, 63);
  // Two sibling threadIdx.x loops of different extents: no one block shape serves both.
  auto mismatch = make_func(
      "mismatch", {out}, {},
      loop::make_seq({gpu_loop(a, Expr(64), ForKind::kGpuThreadX, store(out, a, Expr(1.0))),
                      gpu_loop(b, Expr(32), ForKind::kGpuThreadX, store(out, b, Expr(2.0)))}));
  EXPECT_THROW(emit_cuda(mismatch), Error);
  // threadIdx.x bound inside threadIdx.x.
  auto nested = make_func(
      "nested", {out}, {},
      gpu_loop(a, Expr(8), ForKind::kGpuThreadX,
               gpu_loop(b, Expr(8), ForKind::kGpuThreadX, store(out, a * Expr(8) + b, Expr(1.0)))));
  EXPECT_THROW(emit_cuda(nested), Error);
  // A GPU loop that does not start at 0.
  auto offset =
      make_func("offset", {out}, {},
                loop::make_for(a, Expr(1), Expr(8), ForKind::kGpuBlockX, store(out, a, Expr(1.0))));
  EXPECT_THROW(emit_cuda(offset), Error);
}

}  // namespace
}  // namespace tessera::codegen
