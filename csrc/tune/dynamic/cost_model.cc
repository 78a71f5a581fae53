#include "tune/dynamic/cost_model.h"

#include <algorithm>

#include "ir/eval.h"
#include "util/check.h"

namespace tessera::tune::dynamic {

namespace {

int64_t evaluate_extent(const ir::Expr& e, const std::map<const ir::ExprNode*, int64_t>& sizes) {
  if (e->is_const_int()) return e->int_value;
  ir::EvalEnv env;
  for (const auto& [var, value] : sizes) env.vars[var] = ir::Scalar::of_int(value);
  return ir::evaluate(e, env).i;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

double stage_points_at(const schedule::Stage& s, const std::map<const ir::ExprNode*, int64_t>& at) {
  double p = 1;
  for (const auto* axes : {&s.op->op->axes, &s.op->op->reduce_axes}) {
    for (const ir::IterVar& iv : *axes) p *= static_cast<double>(evaluate_extent(iv.extent, at));
  }
  return p;
}

}  // namespace

MicroKernelGeometry geometry_of(const schedule::StagePlan& plan,
                                const schedule::KernelSchedule& schedule,
                                const std::map<const ir::ExprNode*, int64_t>& at) {
  TESSERA_CHECK(!plan.stages.empty() && schedule.stages.size() == plan.stages.size())
      << "schedule has " << schedule.stages.size() << " stages for a plan of "
      << plan.stages.size();
  size_t main = 0;
  double most = -1;
  for (size_t i = 0; i < plan.stages.size(); ++i) {
    const double p = stage_points_at(plan.stages[i], at);
    if (p > most) {
      most = p;
      main = i;
    }
  }
  const ir::ComputeOpNode& op = *plan.stages[main].op->op;
  const schedule::StageAnnotation& ann = schedule.stages[main];
  TESSERA_CHECK(ann.tile_outer.size() == op.axes.size())
      << "stage " << op.name << ": " << ann.tile_outer.size() << " cache tiles for "
      << op.axes.size() << " axes";
  MicroKernelGeometry g;
  g.stage = main;
  for (const ir::IterVar& iv : op.axes) g.extents.push_back(iv.extent);
  for (const ir::IterVar& iv : op.reduce_axes) g.reduce_extents.push_back(iv.extent);
  g.tiles = ann.tile_outer;
  g.parallel = ann.parallel;
  return g;
}

double InstanceShape::wave_ratio() const {
  if (tiles <= 0 || threads <= 1) return 1.0;
  return static_cast<double>(ceil_div(tiles, threads) * threads) / static_cast<double>(tiles);
}

InstanceShape instance_shape(const MicroKernelGeometry& g,
                             const std::map<const ir::ExprNode*, int64_t>& sizes, int threads) {
  InstanceShape s;
  s.threads = g.parallel ? std::max(1, threads) : 1;
  double points = 1, padded = 1;
  s.tiles = 1;
  for (size_t a = 0; a < g.extents.size(); ++a) {
    const int64_t n = evaluate_extent(g.extents[a], sizes);
    const int64_t t = std::max<int64_t>(1, g.tiles[a]);
    const int64_t count = ceil_div(n, t);
    points *= static_cast<double>(n);
    padded *= static_cast<double>(count * t);
    s.tiles *= count;
  }
  double reduce = 1;
  for (const ir::Expr& e : g.reduce_extents) {
    reduce *= static_cast<double>(evaluate_extent(e, sizes));
  }
  s.work = points * reduce;
  s.padding = points > 0 ? padded / points : 1.0;
  return s;
}

double wave_factor(const InstanceShape& s, double wave_k) {
  return wave_k * s.wave_ratio() + (1.0 - wave_k);
}

double predict_ms(const InstanceShape& s, double throughput, double wave_k) {
  TESSERA_CHECK(throughput > 0) << "throughput must be positive";
  if (s.work <= 0) return 0;
  return s.work * s.padding * wave_factor(s, wave_k) / throughput;
}

double throughput_from(const InstanceShape& s, double ms, double wave_k) {
  TESSERA_CHECK(ms > 0 && s.work > 0) << "throughput needs a positive time and work";
  return s.work * s.padding * wave_factor(s, wave_k) / ms;
}

WaveFit fit_wave(const std::vector<WaveSample>& samples, double fallback_k) {
  TESSERA_CHECK(!samples.empty()) << "fit_wave needs samples";
  double mx = 0, mz = 0;
  for (const WaveSample& w : samples) {
    TESSERA_CHECK(w.ms_per_point > 0) << "fit_wave needs positive times";
    mx += w.wave_ratio;
    mz += w.ms_per_point;
  }
  mx /= static_cast<double>(samples.size());
  mz /= static_cast<double>(samples.size());
  double sxx = 0, sxz = 0;
  for (const WaveSample& w : samples) {
    sxx += (w.wave_ratio - mx) * (w.wave_ratio - mx);
    sxz += (w.wave_ratio - mx) * (w.ms_per_point - mz);
  }
  WaveFit fit;
  fit.wave_k = fallback_k;
  if (sxx > 1e-12) {
    const double b = sxz / sxx, a = mz - b * mx;
    fit.wave_k = a + b > 0 ? std::clamp(b / (a + b), 0.0, 1.0) : fallback_k;
  }
  // With k fixed, each sample says throughput = wave / ms_per_point; their mean is the estimate.
  double sum = 0;
  for (const WaveSample& w : samples) {
    sum += (fit.wave_k * w.wave_ratio + 1 - fit.wave_k) / w.ms_per_point;
  }
  fit.throughput = sum / static_cast<double>(samples.size());
  return fit;
}

}  // namespace tessera::tune::dynamic
