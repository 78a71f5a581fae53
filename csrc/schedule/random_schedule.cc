#include "schedule/random_schedule.h"

#include <algorithm>
#include <numeric>

namespace tessera::schedule {

namespace {

int64_t pick(std::mt19937_64& rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, std::max(lo, hi))(rng);
}

int64_t const_extent(const ir::Expr& e, int64_t guess) {
  return e->is_const_int() ? e->int_value : guess;
}

}  // namespace

StageAnnotation random_stage_annotation(const Stage& stage, const StagePlan& plan,
                                        const Target& target, std::mt19937_64& rng) {
  const ir::ComputeOpNode& op = *stage.op->op;
  const int n = static_cast<int>(op.axes.size()), m = static_cast<int>(op.reduce_axes.size());
  AccessPattern ap = analyze_access_pattern(stage, plan);
  StageAnnotation a;
  a.op = stage.op->name;
  a.parallel = pick(rng, 0, 3) != 0;
  if (m > 0 && ap.reduce_contiguous && pick(rng, 0, 2) == 0) {
    a.sketch = Sketch::kCrossLaneReduction;
    a.vector_width = static_cast<int>(int64_t{1} << pick(rng, 0, 4));
    for (int i = 0; i < n; ++i) a.tile_outer.push_back(pick(rng, 1, 4));
    a.tile_reg.assign(n, 1);
    for (int r = 0; r < m; ++r) a.tile_reduce.push_back(const_extent(op.reduce_axes[r].extent, 8));
    return a;
  }
  a.sketch = Sketch::kMultiLevelTiling;
  int64_t reg_points = 1;
  for (int i = 0; i < n; ++i) {
    int64_t ext = const_extent(op.axes[i].extent, 16);
    int64_t reg = std::min<int64_t>(pick(rng, 1, 6), std::max<int64_t>(ext, 1));
    if (reg_points * reg > 64) reg = 1;
    reg_points *= reg;
    a.tile_reg.push_back(reg);
    a.tile_outer.push_back(reg * pick(rng, 1, 3));
  }
  if (n > 0 && pick(rng, 0, 3) != 0) {
    // Mostly the innermost axis; sometimes another one (gathers/scatters, packing along a
    // dimension other than the last).
    const int v = pick(rng, 0, 2) != 0 ? n - 1 : static_cast<int>(pick(rng, 0, n - 1));
    if (v != n - 1) ap = analyze_access_pattern(stage, plan, v);
    a.vector_axis = v;
    a.vector_width = static_cast<int>(int64_t{1} << pick(rng, 0, 4));
    if (a.vector_width > target.vector_lanes) a.vector_width = target.vector_lanes;
    int64_t mult = pick(rng, 1, 2);
    a.tile_reg[v] = a.vector_width * mult;
    a.tile_outer[v] = a.tile_reg[v] * pick(rng, 1, 3);
    if (!ap.packable.empty() && pick(rng, 0, 1)) a.pack = ap.packable;
  }
  for (int r = 0; r < m; ++r) {
    a.tile_reduce.push_back(pick(rng, 1, const_extent(op.reduce_axes[r].extent, 8)));
  }
  a.s1_order.resize(n);
  std::iota(a.s1_order.begin(), a.s1_order.end(), 0);
  std::shuffle(a.s1_order.begin(), a.s1_order.end(), rng);
  if (m > 0) {
    a.reduce_unroll = int64_t{1} << pick(rng, 0, 3);
    a.prefetch = pick(rng, 0, 1) != 0;
  }
  return a;
}

KernelSchedule random_schedule(const StagePlan& plan, const Target& target, std::mt19937_64& rng) {
  KernelSchedule k;
  k.tuner = "random";
  k.plan = plan.choices;
  for (const Stage& s : plan.stages)
    k.stages.push_back(random_stage_annotation(s, plan, target, rng));
  return k;
}

}  // namespace tessera::schedule
