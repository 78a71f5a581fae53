#include "tune/dynamic/cost_model.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "ir/eval.h"
#include "util/check.h"

namespace tessera::tune::dynamic {

int64_t evaluate_extent(const ir::Expr& e, const std::map<const ir::ExprNode*, int64_t>& sizes) {
  if (e->is_const_int()) return e->int_value;
  ir::EvalEnv env;
  for (const auto& [var, value] : sizes) env.vars[var] = ir::Scalar::of_int(value);
  return ir::evaluate(e, env).i;
}

namespace {

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
  const bool whole_register_tiles = ann.edge == schedule::EdgeMode::kLocalPad &&
                                    ann.sketch == schedule::Sketch::kMultiLevelTiling;
  for (size_t a = 0; a < op.axes.size(); ++a) {
    const bool vector_axis = static_cast<int>(a) == ann.vector_axis;
    const bool has_reg = a < ann.tile_reg.size();
    g.granules.push_back(has_reg && (vector_axis || whole_register_tiles) ? ann.tile_reg[a] : 1);
  }
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
  double points = 1, computed = 1;
  s.tiles = 1;
  for (size_t a = 0; a < g.extents.size(); ++a) {
    const int64_t n = evaluate_extent(g.extents[a], sizes);
    const int64_t granule = std::max<int64_t>(1, g.granules[a]);
    points *= static_cast<double>(n);
    computed *= static_cast<double>(ceil_div(n, granule) * granule);
    s.tiles *= ceil_div(n, std::max<int64_t>(1, g.tiles[a]));
  }
  double reduce = 1;
  for (const ir::Expr& e : g.reduce_extents) {
    reduce *= static_cast<double>(evaluate_extent(e, sizes));
  }
  s.work = points * reduce;
  s.padding = points > 0 ? computed / points : 1.0;
  return s;
}

double wave_factor(const InstanceShape& s, double wave_k) {
  return wave_k * s.wave_ratio() + (1.0 - wave_k);
}

namespace {

double line_ms(const KernelTimeModel& m, double u) { return m.overhead_ms + u / m.throughput; }

// Time at u on the segment from knot a to knot b (u may lie beyond them); where the segment
// falls, in proportion to u from the nearer knot `near`.
double on_segment(const std::pair<double, double>& a, const std::pair<double, double>& b,
                  const std::pair<double, double>& near, double u) {
  const double slope = (b.second - a.second) / (b.first - a.first);
  if (slope <= 0 && (u < a.first || u > b.first)) return near.second * u / near.first;
  return a.second + slope * (u - a.first);
}

}  // namespace

double predict_ms(const InstanceShape& s, const KernelTimeModel& m, double wave_k) {
  TESSERA_CHECK(m.throughput > 0) << "throughput must be positive";
  if (s.work <= 0) return 0;
  const double u = s.work * s.padding * wave_factor(s, wave_k);
  const auto& k = m.knots;
  if (k.size() < 2) return line_ms(m, u);
  size_t i = 1;  // the segment k[i-1]..k[i] holding u, or the end segment nearer it
  while (i + 1 < k.size() && u > k[i].first) ++i;
  return on_segment(k[i - 1], k[i], u < k[i - 1].first ? k[i - 1] : k[i], u);
}

namespace {

bool usable(const TimeSample& t) { return t.ms > 0 && t.shape.work > 0; }

// Solves the 3x3 system a x = b by Gaussian elimination with partial pivoting; false when it is
// (numerically) singular.
bool solve3(double a[3][3], double b[3], double x[3]) {
  for (int c = 0; c < 3; ++c) {
    int piv = c;
    for (int r = c + 1; r < 3; ++r) {
      if (std::abs(a[r][c]) > std::abs(a[piv][c])) piv = r;
    }
    if (std::abs(a[piv][c]) < 1e-9) return false;
    std::swap(a[c], a[piv]);
    std::swap(b[c], b[piv]);
    for (int r = c + 1; r < 3; ++r) {
      const double f = a[r][c] / a[c][c];
      for (int k = c; k < 3; ++k) a[r][k] -= f * a[c][k];
      b[r] -= f * b[c];
    }
  }
  for (int c = 2; c >= 0; --c) {
    double v = b[c];
    for (int k = c + 1; k < 3; ++k) v -= a[c][k] * x[k];
    x[c] = v / a[c][c];
  }
  return true;
}

// The least-squares line through (u, ms); through the origin where no overhead separates.
KernelTimeModel fit_line(const std::vector<double>& u, const std::vector<double>& ms) {
  const double n = static_cast<double>(u.size());
  double mu = 0, mm = 0;
  for (size_t i = 0; i < u.size(); ++i) {
    mu += u[i] / n;
    mm += ms[i] / n;
  }
  double suu = 0, sum = 0;
  for (size_t i = 0; i < u.size(); ++i) {
    suu += (u[i] - mu) * (u[i] - mu);
    sum += (u[i] - mu) * (ms[i] - mm);
  }
  KernelTimeModel m;
  if (suu > 1e-12 * mu * mu) {
    const double slope = sum / suu, overhead = mm - slope * mu;
    if (slope > 0 && overhead >= 0) {
      m.throughput = 1 / slope;
      m.overhead_ms = overhead;
      return m;
    }
  }
  // Through the origin: throughput = sum u^2 / sum u ms.
  double uu = 0, um = 0;
  for (size_t i = 0; i < u.size(); ++i) {
    uu += u[i] * u[i];
    um += u[i] * ms[i];
  }
  m.throughput = uu / um;
  return m;
}

}  // namespace

KernelTimeModel fit_kernel(const std::vector<TimeSample>& samples, double wave_k) {
  std::vector<double> u, ms;
  std::map<double, std::pair<double, int>> at_u;  // u -> (sum of ms, count)
  for (const TimeSample& t : samples) {
    if (!usable(t)) continue;
    u.push_back(t.shape.work * t.shape.padding * wave_factor(t.shape, wave_k));
    ms.push_back(t.ms);
    auto& [sum, count] = at_u[u.back()];
    sum += t.ms;
    ++count;
  }
  TESSERA_CHECK(!u.empty()) << "fit_kernel needs a sample with positive time and work";
  KernelTimeModel m = fit_line(u, ms);
  for (const auto& [x, sum_count] : at_u) {
    m.knots.push_back({x, sum_count.first / sum_count.second});
  }
  return m;
}

WaveFit fit_wave(const std::vector<TimeSample>& samples, double fallback_k) {
  WaveFit fit;
  fit.wave_k = fallback_k;
  // Normal equations of ms = o + a W + b W x, with W scaled by its mean for conditioning.
  double scale = 0;
  int n = 0;
  for (const TimeSample& t : samples) {
    if (!usable(t)) continue;
    scale += t.shape.work * t.shape.padding;
    ++n;
  }
  if (n >= 3) {
    scale /= n;
    double a[3][3] = {}, b[3] = {}, x[3] = {};
    for (const TimeSample& t : samples) {
      if (!usable(t)) continue;
      const double w = t.shape.work * t.shape.padding / scale;
      const double r[3] = {1, w, w * t.shape.wave_ratio()};
      for (int i = 0; i < 3; ++i) {
        for (int j = 0; j < 3; ++j) a[i][j] += r[i] * r[j];
        b[i] += r[i] * t.ms;
      }
    }
    if (solve3(a, b, x) && x[1] + x[2] > 0) fit.wave_k = std::clamp(x[2] / (x[1] + x[2]), 0.0, 1.0);
  }
  fit.model = fit_kernel(samples, fit.wave_k);
  return fit;
}

}  // namespace tessera::tune::dynamic
