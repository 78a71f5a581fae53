// The graph-segment executor: arena planning and chained kernels vs the reference interpreter.
#include <gtest/gtest.h>

#include <random>

#include "compiler/build.h"
#include "ops/ops.h"
#include "ops/reference.h"
#include "runtime/program.h"
#include "util/check.h"

namespace tessera::runtime {
namespace {

TEST(PlanArena, LiveBuffersNeverOverlapAndDeadOnesShare) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 200; ++trial) {
    int n = static_cast<int>(rng() % 12) + 1;
    std::vector<int64_t> bytes;
    std::vector<std::pair<int, int>> life;
    for (int i = 0; i < n; ++i) {
      bytes.push_back(static_cast<int64_t>(rng() % 5000));
      int a = static_cast<int>(rng() % 10), b = a + static_cast<int>(rng() % 4);
      life.push_back({a, b});
    }
    int64_t total = 0;
    std::vector<int64_t> off = plan_arena(bytes, life, &total);
    for (int i = 0; i < n; ++i) {
      EXPECT_EQ(off[i] % 64, 0);
      EXPECT_LE(off[i] + bytes[i], total);
      for (int j = i + 1; j < n; ++j) {
        bool alive_together = life[i].first <= life[j].second && life[j].first <= life[i].second;
        bool disjoint_mem = off[i] + bytes[i] <= off[j] || off[j] + bytes[j] <= off[i];
        if (alive_together && bytes[i] > 0 && bytes[j] > 0) {
          EXPECT_TRUE(disjoint_mem);
        }
      }
    }
  }
  int64_t total = 0;
  std::vector<int64_t> off = plan_arena({1000, 1000, 1000}, {{0, 1}, {2, 3}, {4, 5}}, &total);
  EXPECT_EQ(total, 1024);  // three dead-in-turn buffers share one slot
  EXPECT_EQ(off[0], off[1]);
}

TEST(Program, ChainedKernelsMatchReference) {
  using ir::int_imm;
  ir::Tensor a = ir::placeholder("A", {int_imm(13), int_imm(20)});
  ir::Tensor b = ir::placeholder("B", {int_imm(20), int_imm(17)});
  ir::Tensor t_in = ir::placeholder("T", {int_imm(13), int_imm(17)});
  ir::Tensor u_in = ir::placeholder("U", {int_imm(13), int_imm(17)});
  // Three kernels: T = A @ B ; U = relu(T) ; Y = U + T (T lives across two steps).
  auto k1 = compiler::build_cpu({ops::matmul(a, b)}, {a, b}).kernel();
  auto k2 = compiler::build_cpu({ops::relu(t_in)}, {t_in}).kernel();
  auto k3 = compiler::build_cpu({ops::add(u_in, t_in)}, {u_in, t_in}).kernel();
  const int64_t tb = 13 * 17 * 4;
  using K = ProgramBuffer::Kind;
  std::vector<ProgramBuffer> bufs = {{K::kInput, 0, 13 * 20 * 4},
                                     {K::kInput, 1, 20 * 17 * 4},
                                     {K::kTemp, -1, tb},
                                     {K::kTemp, -1, tb},
                                     {K::kOutput, 0, tb}};
  Program p(bufs, {{k1, {0, 1, 2}, {}}, {k2, {2, 3}, {}}, {k3, {3, 2, 4}, {}}});
  EXPECT_EQ(p.num_inputs(), 2);
  EXPECT_EQ(p.num_outputs(), 1);
  EXPECT_NE(p.offset_of(2), p.offset_of(3));  // both alive in step 2
  NDArray x = NDArray::random(ir::DType::kFloat32, {13, 20}, 1);
  NDArray w = NDArray::random(ir::DType::kFloat32, {20, 17}, 2);
  NDArray y(ir::DType::kFloat32, {13, 17});
  for (int rep = 0; rep < 2; ++rep) p.run({x.data(), w.data()}, {y.data()});
  ir::Tensor yt = ops::add(ops::relu(ops::matmul(a, b)), ops::matmul(a, b));
  NDArray want = ops::run_reference({yt}, {{a.get(), x}, {b.get(), w}})[0];
  CompareResult r = allclose(y, want, 1e-4, 1e-4);
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(Program, RejectsMismatchedSteps) {
  ir::Tensor x = ir::placeholder("X", {ir::int_imm(8)});
  auto k = compiler::build_cpu({ops::relu(x)}, {x}).kernel();
  using K = ProgramBuffer::Kind;
  EXPECT_THROW(Program({{K::kInput, 0, 32}, {K::kOutput, 0, 16}}, {{k, {0, 1}, {}}}),
               tessera::Error);
  EXPECT_THROW(Program({{K::kInput, 0, 32}}, {{k, {0}, {}}}), tessera::Error);
  Program ok({{K::kInput, 0, 32}, {K::kOutput, 0, 32}}, {{k, {0, 1}, {}}});
  EXPECT_THROW(ok.run({}, {}), tessera::Error);
}

TEST(Program, InputsAndOutputsAreNumberedOnceEach) {
  ir::Tensor x = ir::placeholder("X", {ir::int_imm(8)});
  auto k = compiler::build_cpu({ops::relu(x)}, {x}).kernel();
  using K = ProgramBuffer::Kind;
  // Input 0 given twice, input 1 missing, output without an index.
  EXPECT_THROW(
      Program({{K::kInput, 0, 32}, {K::kInput, 0, 32}, {K::kOutput, 0, 32}}, {{k, {0, 2}, {}}}),
      tessera::Error);
  EXPECT_THROW(Program({{K::kInput, 1, 32}, {K::kOutput, 0, 32}}, {{k, {0, 1}, {}}}),
               tessera::Error);
  EXPECT_THROW(Program({{K::kInput, 0, 32}, {K::kOutput, -1, 32}}, {{k, {0, 1}, {}}}),
               tessera::Error);
}

TEST(Program, RawCallPatchesOnlyInputsAndOutputs) {
  // y = relu(x) through a temp that lives in the arena: two calls with different caller
  // buffers must each see their own input and write their own output.
  ir::Tensor x = ir::placeholder("X", {ir::int_imm(40)});
  auto neg = compiler::build_cpu({ops::neg(x)}, {x}).kernel();
  auto relu = compiler::build_cpu({ops::relu(x)}, {x}).kernel();
  using K = ProgramBuffer::Kind;
  const int64_t b = 40 * 4;
  Program p({{K::kInput, 0, b}, {K::kTemp, -1, b}, {K::kOutput, 0, b}},
            {{neg, {0, 1}, {}}, {relu, {1, 2}, {}}});
  EXPECT_EQ(p.arena_bytes(), 192);  // 160 bytes, 64-byte aligned
  for (int rep = 0; rep < 2; ++rep) {
    NDArray in = NDArray::random(ir::DType::kFloat32, {40}, 10 + rep);
    NDArray out(ir::DType::kFloat32, {40});
    void* ins[] = {in.data()};
    void* outs[] = {out.data()};
    p.run_raw(ins, outs);
    const float* a = static_cast<const float*>(in.data());
    const float* y = static_cast<const float*>(out.data());
    for (int i = 0; i < 40; ++i) EXPECT_EQ(y[i], a[i] < 0 ? -a[i] : 0.0f) << i;
  }
  void* null_in[] = {nullptr};
  NDArray out(ir::DType::kFloat32, {40});
  void* outs[] = {out.data()};
  EXPECT_THROW(p.run_raw(null_in, outs), tessera::Error);  // null only for empty buffers
}

}  // namespace
}  // namespace tessera::runtime
