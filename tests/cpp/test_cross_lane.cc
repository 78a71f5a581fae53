// The cross-lane reduction sketch: several vector accumulators, a vector tail, a scalar tail and
// a tree fold of the lanes. Row lengths around every boundary (shorter than a vector, one block
// of accumulators, blocks plus vectors plus elements), power-of-two and other lane counts, sum
// and max, JIT and loop-IR interpreter, all against the reference interpreter.
#include "e2e_harness.h"
#include "ops/ops.h"

namespace tessera::testing {
namespace {

using ir::placeholder;
using ir::Tensor;

schedule::KernelSchedule cross_lane(const Tensor& out, int lanes) {
  schedule::StageAnnotation a;
  a.op = out->name;
  a.sketch = schedule::Sketch::kCrossLaneReduction;
  a.vector_width = lanes;
  a.tile_outer = {2};
  a.tile_reg = {1};
  a.tile_reduce = {0};
  schedule::KernelSchedule ks;
  ks.stages.push_back(a);
  return ks;
}

TEST(CrossLane, RowLengthsAroundEveryBoundary) {
  for (int64_t k : {5, 16, 63, 128, 131, 200, 1000}) {
    for (int lanes : {16, 8, 6}) {
      Tensor x = placeholder("X", {ir::int_imm(3), ir::int_imm(k)});
      Tensor s = ops::reduce_sum(x, {1});
      schedule::KernelSchedule ks = cross_lane(s, lanes);
      ks.stages[0].tile_reduce = {k};
      SCOPED_TRACE("k=" + std::to_string(k) + " lanes=" + std::to_string(lanes));
      check_graph({{s}, {x}}, ks, /*use_jit=*/true, {1e-4, 1e-4});
      Tensor mx = ops::reduce_max(x, {1});
      schedule::KernelSchedule km = cross_lane(mx, lanes);
      km.stages[0].tile_reduce = {k};
      check_graph({{mx}, {x}}, km, /*use_jit=*/true);
      if (k <= 200) check_graph({{s}, {x}}, ks, /*use_jit=*/false, {1e-4, 1e-4});
    }
  }
}

TEST(CrossLane, SymbolicRowLength) {
  ir::Var n =
      ir::size_var("n", 1, 4096);  // bounded: longer rows would be split (split_reduction.h)
  Tensor x = placeholder("X", {ir::int_imm(4), n});
  Tensor s = ops::reduce_sum(x, {1});
  schedule::KernelSchedule ks = cross_lane(s, 16);
  ks.stages[0].tile_reduce = {256};
  for (int64_t len : {3, 64, 77, 300}) {
    check_graph({{s}, {x}, {{n.get(), len}}}, ks, /*use_jit=*/true, {1e-4, 1e-4});
  }
}

}  // namespace
}  // namespace tessera::testing
