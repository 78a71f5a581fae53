// Race and bounds checking of the GPU-semantics interpreter (loop/interpreter.h, race_check.h):
// hand-built kernels that race or index out of bounds must be reported, their fixed versions
// must not, and the GPU schedules stop being clean when their barriers or tail guards are taken
// out (so the clean reports of the schedule tests mean something).
#include <gtest/gtest.h>

#include <vector>

#include "loop/interpreter.h"
#include "loop/stmt_functor.h"
#include "ops/linalg.h"
#include "ops/nn.h"
#include "runtime/ndarray.h"
#include "schedule/gpu/gpu_schedule.h"
#include "schedule/gpu/tiled_reduction.h"

namespace tessera {
namespace {

using ir::Buffer;
using ir::DType;
using ir::Expr;
using ir::Var;
using loop::ForKind;
using loop::Stmt;

constexpr int64_t kThreads = 32;  // threads per block of the hand-built kernels
constexpr int64_t kBlocks = 3;

Stmt store(const Buffer& b, Expr i, Expr v) {
  return loop::make_store(b, std::move(i), std::move(v));
}
Expr ld(const Buffer& b, Expr i) { return ir::load(b, std::move(i)); }

// A launch of kBlocks x kThreads running `body(bx, tx)` with a shared tile of kThreads floats,
// over global buffers in[kBlocks * kThreads] and out[kBlocks * kThreads].
struct Kernel {
  Buffer in = ir::make_buffer("in", DType::kFloat32, {Expr(kBlocks * kThreads)});
  Buffer out = ir::make_buffer("out", DType::kFloat32, {Expr(kBlocks * kThreads)});
  Buffer tile = ir::make_buffer("tile", DType::kFloat32, {Expr(kThreads)}, ir::MemScope::kShared);
  Var bx = ir::var("bx", 0, kBlocks - 1);
  Var tx = ir::var("tx", 0, kThreads - 1);

  Expr global() const { return Expr(bx) * Expr(kThreads) + tx; }

  loop::GpuCheckReport run(const Stmt& body) const {
    loop::LoweredFunc f;
    f.name = "k";
    f.args = {in, out};
    Stmt threads = loop::make_for(tx, Expr(0), Expr(kThreads), ForKind::kGpuThreadX,
                                  loop::make_allocate(tile, body));
    f.body = loop::make_for(bx, Expr(0), Expr(kBlocks), ForKind::kGpuBlockX, threads);
    std::vector<float> a(kBlocks * kThreads, 1.0f), b(kBlocks * kThreads);
    return loop::interpret_gpu(f, {a.data(), b.data()}, {});
  }
};

TEST(GpuRaceCheck, NeighbourReadWithoutBarrierRaces) {
  Kernel k;
  const Expr next = ir::floormod(Expr(k.tx) + Expr(1), Expr(kThreads));
  const Stmt write = store(k.tile, k.tx, ld(k.in, k.global()));
  const Stmt read = store(k.out, k.global(), ld(k.tile, next));
  const loop::GpuCheckReport racy = k.run(loop::make_seq({write, read}));
  // Thread t reads t+1's element before t+1 runs (its write then races with that read), and the
  // last thread reads element 0, written by thread 0 in the same phase.
  EXPECT_EQ(racy.races, kBlocks * kThreads);
  // Each read but the last thread's also comes before its word is written.
  EXPECT_EQ(racy.uninitialized_reads, kBlocks * (kThreads - 1));
  ASSERT_GE(racy.messages.size(), 2u);
  EXPECT_NE(racy.messages[1].find("race on shared tile[1]"), std::string::npos) << racy.messages[1];
  const loop::GpuCheckReport fixed = k.run(loop::make_seq({write, loop::make_barrier(), read}));
  EXPECT_TRUE(fixed.clean()) << fixed.messages[0];
}

TEST(GpuRaceCheck, EveryThreadWritingOneSharedWordRaces) {
  Kernel k;
  const loop::GpuCheckReport r = k.run(store(k.tile, Expr(0), ir::cast(DType::kFloat32, k.tx)));
  EXPECT_EQ(r.races, kBlocks * (kThreads - 1)) << "every write after the first of each block";
  // One writer, the others reading after a barrier: clean.
  const Stmt one = loop::make_if(ir::eq(k.tx, Expr(0)), store(k.tile, Expr(0), Expr(2.0f)));
  const Stmt all_read = store(k.out, k.global(), ld(k.tile, Expr(0)));
  EXPECT_TRUE(k.run(loop::make_seq({one, loop::make_barrier(), all_read})).clean());
  EXPECT_GT(k.run(loop::make_seq({one, all_read})).races, 0);
}

TEST(GpuRaceCheck, GlobalWritesFromTwoBlocksRace) {
  Kernel k;
  // Thread 0 of every block writes out[0]: blocks are unordered even across barriers.
  const Stmt s = loop::make_if(ir::eq(k.tx, Expr(0)), store(k.out, Expr(0), Expr(1.0f)));
  EXPECT_EQ(k.run(loop::make_seq({loop::make_barrier(), s})).races, kBlocks - 1);
  // Within one block a barrier orders global accesses too.
  const Stmt first = loop::make_if(ir::eq(k.tx, Expr(0)), store(k.out, k.global(), Expr(1.0f)));
  const Stmt second =
      loop::make_if(ir::eq(k.tx, Expr(1)), store(k.out, k.global() - Expr(1), Expr(2.0f)));
  EXPECT_TRUE(k.run(loop::make_seq({first, loop::make_barrier(), second})).clean());
  EXPECT_EQ(k.run(loop::make_seq({first, second})).races, kBlocks);
}

TEST(GpuRaceCheck, ReadsOfUnwrittenSharedMemoryAreReported) {
  Kernel k;
  // Only the even words of the tile are written; every thread reads its own word after a barrier.
  const Stmt even =
      loop::make_if(ir::eq(ir::floormod(k.tx, Expr(2)), Expr(0)), store(k.tile, k.tx, Expr(1.0f)));
  const Stmt read = store(k.out, k.global(), ld(k.tile, k.tx));
  const loop::GpuCheckReport r = k.run(loop::make_seq({even, loop::make_barrier(), read}));
  EXPECT_EQ(r.uninitialized_reads, kBlocks * kThreads / 2) << "the odd words";
  EXPECT_EQ(r.races, 0);
  EXPECT_FALSE(r.clean());
  ASSERT_FALSE(r.messages.empty());
  EXPECT_NE(r.messages[0].find("uninitialized read of shared tile[1]"), std::string::npos)
      << r.messages[0];
  // Global buffers belong to the caller: reading one before writing it is not reported.
  EXPECT_TRUE(k.run(store(k.out, k.global(), ld(k.out, k.global()) + Expr(1.0f))).clean());
}

TEST(GpuRaceCheck, OutOfBoundsAccessesAreCountedAndSkipped) {
  Kernel k;
  // One element past the end: the last thread of the last block writes out of bounds.
  const loop::GpuCheckReport w = k.run(store(k.out, k.global() + Expr(1), Expr(1.0f)));
  EXPECT_EQ(w.out_of_bounds, 1);
  EXPECT_EQ(w.races, 0);
  ASSERT_FALSE(w.messages.empty());
  EXPECT_NE(w.messages[0].find("writes out[96]"), std::string::npos) << w.messages[0];
  // Reads below zero, and of a shared tile past its end.
  EXPECT_EQ(k.run(store(k.out, k.global(), ld(k.in, k.global() - Expr(2)))).out_of_bounds, 2);
  EXPECT_EQ(k.run(store(k.tile, k.tx + Expr(kThreads / 2), Expr(0.0f))).out_of_bounds,
            kBlocks * kThreads / 2);
}

// Removes every barrier of a kernel.
class DropBarriers : public loop::StmtMutator {
 protected:
  Stmt mutate_barrier(const Stmt&) override { return loop::make_nop(); }
};

// Replaces every if by its then branch (drops the tail guards).
class DropGuards : public loop::StmtMutator {
 protected:
  Stmt mutate_if(const Stmt& s) override { return mutate(s->then_case); }
};

loop::GpuCheckReport run_random(const loop::LoweredFunc& f, const std::vector<ir::Tensor>& ts) {
  std::vector<runtime::NDArray> arrays;
  std::vector<void*> ptrs;
  for (const ir::Tensor& t : ts) {
    std::vector<int64_t> shape;
    for (const Expr& d : t->shape) shape.push_back(d->int_value);
    arrays.push_back(runtime::NDArray::random(t->dtype, shape, 5));
  }
  for (runtime::NDArray& a : arrays) ptrs.push_back(a.data());
  return loop::interpret_gpu(f, ptrs, {});
}

TEST(GpuRaceCheck, SchedulesNeedTheirBarriersAndGuards) {
  ir::Tensor a = ir::placeholder("A", {Expr(19), Expr(23)});
  ir::Tensor b = ir::placeholder("B", {Expr(23), Expr(21)});
  ir::Tensor c = ops::matmul(a, b);
  loop::LoweredFunc mm = schedule::gpu::lower_gpu({c}, {a, b}, "mm");
  ASSERT_TRUE(run_random(mm, {a, b, c}).clean());
  loop::LoweredFunc no_barrier = mm;
  no_barrier.body = DropBarriers().mutate(mm.body);
  EXPECT_GT(run_random(no_barrier, {a, b, c}).races, 0);
  loop::LoweredFunc no_guard = mm;
  no_guard.body = DropGuards().mutate(mm.body);
  EXPECT_GT(run_random(no_guard, {a, b, c}).out_of_bounds, 0);

  ir::Tensor x = ir::placeholder("x", {Expr(5), Expr(70)});
  ir::Tensor y = ops::softmax(x);
  loop::LoweredFunc sm = schedule::gpu::lower_gpu({y}, {x}, "softmax");
  ASSERT_TRUE(run_random(sm, {x, y}).clean());
  loop::LoweredFunc sm_racy = sm;
  sm_racy.body = DropBarriers().mutate(sm.body);
  EXPECT_GT(run_random(sm_racy, {x, y}).races, 0);
}

}  // namespace
}  // namespace tessera
