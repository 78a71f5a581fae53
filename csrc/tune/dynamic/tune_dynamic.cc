#include "tune/dynamic/tune_dynamic.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <set>

#include "ir/eval.h"
#include "runtime/ndarray.h"
#include "runtime/parallel.h"
#include "tune/dynamic/selection_records.h"
#include "util/check.h"

namespace tessera::tune::dynamic {

namespace {

using compiler::BuiltKernel;
using schedule::KernelSchedule;

// A predicted time for an instance without work (a size of 0): every kernel returns at once.
constexpr double kEmptyInstanceMs = 1e-9;

std::string point_text(const SizePoint& p) {
  std::string s;
  for (size_t a = 0; a < p.size(); ++a) s += (a ? "," : "") + std::to_string(p[a]);
  return s;
}

struct Candidate {
  CandidateReport report;
  std::shared_ptr<const BuiltKernel> kernel;
  MicroKernelGeometry geometry;
  InstanceShape calibration;  // the instance its throughput was timed on
  double calibration_ms = 0;
};

// Buffers for every instance: inputs random, everything sized for the largest instance (a
// smaller instance reads and writes a prefix of each buffer in row-major order).
class InstanceBuffers {
 public:
  InstanceBuffers(const DynamicWorkload& w, uint64_t seed) {
    const auto at = w.size_map(w.largest());
    for (size_t i = 0; i < w.inputs().size(); ++i) {
      inputs_.push_back(
          runtime::NDArray::random(w.inputs()[i]->dtype, shape_at(w.inputs()[i], at), seed + i));
    }
    for (const ir::Tensor& o : w.outputs()) outputs_.emplace_back(o->dtype, shape_at(o, at));
  }
  std::vector<void*> pointers(std::vector<runtime::NDArray>* outputs) {
    std::vector<void*> p;
    for (auto& a : inputs_) p.push_back(a.data());
    for (auto& a : *outputs) p.push_back(a.data());
    return p;
  }
  std::vector<void*> pointers() { return pointers(&outputs_); }
  std::vector<runtime::NDArray> fresh_outputs() const { return outputs_; }

 private:
  static std::vector<int64_t> shape_at(const ir::Tensor& t,
                                       const std::map<const ir::ExprNode*, int64_t>& at) {
    std::vector<int64_t> s;
    for (const ir::Expr& d : t->shape) {
      ir::EvalEnv env;
      for (const auto& [v, x] : at) env.vars[v] = ir::Scalar::of_int(x);
      s.push_back(d->is_const_int() ? d->int_value : ir::evaluate(d, env).i);
    }
    return s;
  }
  std::vector<runtime::NDArray> inputs_, outputs_;
};

// Checks candidates against the rules' kernel over the same symbolic DAG at a few sizes: the
// smallest instance and one in the middle with odd sizes (not a multiple of any tile above 1).
class Verifier {
 public:
  Verifier(const DynamicWorkload& w, std::shared_ptr<const BuiltKernel> reference,
           InstanceBuffers* buffers, const DynamicTuneOptions& o)
      : reference_(std::move(reference)), buffers_(buffers), rtol_(o.rtol), atol_rel_(o.atol_rel) {
    SizePoint small, middle;
    for (const SizeRange& r : w.ranges()) {
      small.push_back(r.lo);
      int64_t m = r.lo + (r.hi - r.lo) / 2;
      if (m % 2 == 0 && m + 1 <= r.hi) ++m;
      middle.push_back(m);
    }
    points_ = {small};
    if (middle != small) points_.push_back(middle);
    for (const SizePoint& p : points_) {
      std::vector<runtime::NDArray> out = buffers_->fresh_outputs();
      reference_->run(buffers_->pointers(&out), p);
      expected_.push_back(std::move(out));
    }
  }

  bool check(const BuiltKernel& k, std::string* why) {
    for (size_t i = 0; i < points_.size(); ++i) {
      std::vector<runtime::NDArray> out = buffers_->fresh_outputs();
      for (auto& a : out) a.fill(12345.0);  // unwritten elements show as mismatches
      k.run(buffers_->pointers(&out), points_[i]);
      const std::vector<int64_t> numel = k.kernel()->arg_numels(points_[i]);
      const size_t first_output = numel.size() - out.size();
      for (size_t o = 0; o < out.size(); ++o) {
        if (!close(out[o], expected_[i][o], numel[first_output + o], why)) {
          *why += " at sizes (" + point_text(points_[i]) + ")";
          return false;
        }
      }
    }
    return true;
  }

 private:
  bool close(const runtime::NDArray& got, const runtime::NDArray& want, int64_t n,
             std::string* why) const {
    double scale = 0;
    for (int64_t e = 0; e < n; ++e) scale = std::max(scale, std::abs(want.get(e)));
    const double atol = atol_rel_ * (1 + scale);
    for (int64_t e = 0; e < n; ++e) {
      const double g = got.get(e), x = want.get(e);
      if (!(std::abs(g - x) <= atol + rtol_ * std::abs(x))) {
        *why =
            "element " + std::to_string(e) + ": " + std::to_string(g) + " vs " + std::to_string(x);
        return false;
      }
    }
    return true;
  }

  std::shared_ptr<const BuiltKernel> reference_;
  InstanceBuffers* buffers_;
  double rtol_, atol_rel_;
  std::vector<SizePoint> points_;
  std::vector<std::vector<runtime::NDArray>> expected_;
};

// Candidate schedules, deduplicated by what they build.
class CandidatePool {
 public:
  void add(const KernelSchedule& s, const std::string& origin) {
    if (!seen_.insert(s.stages_text()).second) return;
    CandidateReport r;
    r.schedule = s;
    r.origin = origin;
    reports_.push_back(std::move(r));
  }
  std::vector<CandidateReport>& reports() { return reports_; }

 private:
  std::set<std::string> seen_;
  std::vector<CandidateReport> reports_;
};

void gather_candidates(const DynamicWorkload& w, const DynamicTuneOptions& o,
                       const KernelSchedule& rules, CandidatePool* pool) {
  pool->add(rules, "rules");
  for (const KernelSchedule& s : o.candidates) pool->add(s, "given");
  if (!o.construct_candidates) return;
  std::vector<KernelSchedule> constructed;
  for (const SizePoint& rep : representative_points(w, o.representatives)) {
    const DagCopy inst = w.instantiate(rep);
    const Task task = Task::create(inst.outputs, inst.inputs, w.name());
    const gensor::ConstructResult r = gensor::construct(task, o.construct);
    for (const gensor::ConstructCandidate& c : r.candidates) {
      if (c.measured && !c.result.ok) continue;
      pool->add(c.schedule, "construct@" + point_text(rep));
      constructed.push_back(c.schedule);
    }
  }
  if (!o.mutate_tiles) return;
  const auto at = w.size_map(w.largest());
  for (const KernelSchedule& s : constructed) {
    const schedule::StagePlan plan = schedule::plan_stages(w.outputs(), w.inputs(), s.plan);
    if (plan.stages.size() != s.stages.size()) continue;
    for (const KernelSchedule& m : tile_mutations(plan, s, at)) pool->add(m, "mutation");
  }
}

// The sample point where the micro-kernel runs closest to full waves without padding (ties: the
// most work, the steadiest timing).
const SizePoint& calibration_point(const std::vector<SizePoint>& points,
                                   const MicroKernelGeometry& g, const DynamicWorkload& w,
                                   int threads) {
  size_t best = 0;
  double best_excess = 0, best_work = -1;
  for (size_t i = 0; i < points.size(); ++i) {
    const InstanceShape s = instance_shape(g, w.size_map(points[i]), threads);
    if (s.work <= 0) continue;
    const double excess = s.padding * s.wave_ratio();
    if (best_work < 0 || excess < best_excess - 1e-12 ||
        (excess <= best_excess + 1e-12 && s.work > best_work)) {
      best = i;
      best_excess = excess;
      best_work = s.work;
    }
  }
  return points[best];
}

// Points of distinct wave ratios for fitting k: the calibration point first, then the largest
// ratios (the fewest tiles) down, up to `n`.
std::vector<SizePoint> wave_fit_points(const std::vector<SizePoint>& points,
                                       const MicroKernelGeometry& g, const DynamicWorkload& w,
                                       int threads, const SizePoint& calibration, int n) {
  std::vector<std::pair<double, size_t>> by_ratio;
  for (size_t i = 0; i < points.size(); ++i) {
    const InstanceShape s = instance_shape(g, w.size_map(points[i]), threads);
    if (s.work > 0) by_ratio.push_back({s.wave_ratio(), i});
  }
  std::sort(by_ratio.begin(), by_ratio.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<SizePoint> chosen{calibration};
  std::vector<double> ratios{instance_shape(g, w.size_map(calibration), threads).wave_ratio()};
  for (const auto& [ratio, i] : by_ratio) {
    if (static_cast<int>(chosen.size()) >= n) break;
    const bool fresh = std::none_of(ratios.begin(), ratios.end(),
                                    [&](double r) { return std::abs(r - ratio) < 1e-9; });
    if (!fresh) continue;
    chosen.push_back(points[i]);
    ratios.push_back(ratio);
  }
  return chosen;
}

}  // namespace

std::vector<SizePoint> representative_points(const DynamicWorkload& w, int n) {
  TESSERA_CHECK(n >= 1) << "representative_points needs n >= 1";
  std::vector<SizePoint> reps;
  for (int i = n; i >= 1; --i) {  // the largest first
    SizePoint p;
    for (const SizeRange& r : w.ranges()) {
      p.push_back(r.lo + (r.hi - r.lo) * i / n);
    }
    if (std::find(reps.begin(), reps.end(), p) == reps.end()) reps.push_back(p);
  }
  return reps;
}

std::vector<KernelSchedule> tile_mutations(const schedule::StagePlan& plan, const KernelSchedule& s,
                                           const std::map<const ir::ExprNode*, int64_t>& at) {
  std::vector<KernelSchedule> out;
  if (plan.stages.size() != s.stages.size()) return out;
  const MicroKernelGeometry g = geometry_of(plan, s, at);
  const size_t main = g.stage;
  const schedule::StageAnnotation& ann = s.stages[main];
  const std::vector<int64_t> mid = ann.mid_tiles();
  for (size_t a = 0; a < g.extents.size(); ++a) {
    if (g.extents[a]->is_const_int()) continue;  // a static axis: nothing to adapt to
    for (const bool grow : {false, true}) {
      const int64_t t = ann.tile_outer[a];
      const int64_t nt = grow ? 2 * t : t / 2;
      // Mid tiles must still partition the cache tile; a mid level equal to the cache tile
      // follows it.
      const bool mid_follows = !ann.tile_mid.empty() && ann.tile_mid[a] == t;
      const int64_t nmid = mid_follows ? nt : mid[a];
      if (nt < 1 || nt == t || nmid < ann.tile_reg[a] || nmid % ann.tile_reg[a] != 0 ||
          nt % nmid != 0) {
        continue;
      }
      KernelSchedule m = s;
      m.stages[main].tile_outer[a] = nt;
      if (mid_follows) m.stages[main].tile_mid[a] = nt;
      m.tuner = "dynamic:mutation";
      out.push_back(std::move(m));
    }
  }
  return out;
}

DynamicTuneResult tune_dynamic(const DynamicWorkload& w, const DynamicTuneOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  DynamicTuneResult res;
  if (o.records) {
    if (std::optional<DynamicSelection> stored = load_selection(*o.records, w)) {
      res.selection = *stored;
      res.kernel = DynamicKernel::build(w, res.selection);
      res.from_records = true;
      return res;
    }
  }

  // The rules' kernel over the symbolic DAG: the verification reference and one candidate.
  compiler::BuildOptions rules_opts;
  rules_opts.name = w.name() + "_rules";
  auto reference =
      std::make_shared<const BuiltKernel>(compiler::build_cpu(w.outputs(), w.inputs(), rules_opts));
  InstanceBuffers buffers(w, o.seed);
  Verifier verifier(w, reference, &buffers, o);

  CandidatePool pool;
  gather_candidates(w, o, reference->schedule(), &pool);

  const int threads = runtime::get_num_threads();
  res.points = sample_points(w, o.max_points);
  const auto largest = w.size_map(w.largest());
  SizeTimer timer = o.timer;
  if (!timer) {
    timer = [&](size_t, const BuiltKernel& k, const SizePoint& p) {
      std::vector<void*> ptrs = buffers.pointers();
      return runtime::measure([&] { k.run(ptrs, p); }, o.timing).median_ms;
    };
  }
  auto time_at = [&](size_t c, const BuiltKernel& k, const SizePoint& p) {
    ++res.timings;
    return timer(c, k, p);
  };

  // Compile once, verify, time on the fullest wave.
  std::vector<Candidate> cands;
  for (CandidateReport& r : pool.reports()) {
    Candidate c;
    c.report = r;
    try {
      if (r.origin == "rules") {
        c.kernel = reference;
      } else {
        compiler::BuildOptions opts;
        opts.name = w.name() + "_cand" + std::to_string(cands.size());
        opts.schedule = r.schedule;
        c.kernel =
            std::make_shared<const BuiltKernel>(compiler::build_cpu(w.outputs(), w.inputs(), opts));
      }
      c.report.ok = c.kernel == reference || verifier.check(*c.kernel, &c.report.error);
      if (c.report.ok) {
        c.geometry = geometry_of(c.kernel->plan(), c.kernel->schedule(), largest);
        const SizePoint& cal = calibration_point(res.points, c.geometry, w, threads);
        c.calibration = instance_shape(c.geometry, w.size_map(cal), threads);
        c.calibration_ms = time_at(cands.size(), *c.kernel, cal);
        c.report.throughput =
            c.calibration_ms > 0 && c.calibration.work > 0
                ? throughput_from(c.calibration, c.calibration_ms, o.cost.default_wave_k)
                : 0;
        c.report.ok = c.report.throughput > 0;
        if (!c.report.ok) c.report.error = "no positive time on its calibration instance";
      }
    } catch (const std::exception& e) {
      c.report.ok = false;
      c.report.error = e.what();
    }
    if (!c.report.ok) c.kernel.reset();
    cands.push_back(std::move(c));
  }

  // Early pruning on the micro-kernel's own throughput.
  double best_tp = 0;
  size_t best = 0;
  for (size_t i = 0; i < cands.size(); ++i) {
    if (cands[i].report.ok && cands[i].report.throughput > best_tp) {
      best_tp = cands[i].report.throughput;
      best = i;
    }
  }
  TESSERA_CHECK(best_tp > 0) << "dynamic tuning of " << w.name() << ": no candidate verified";
  std::vector<size_t> alive;
  for (size_t i = 0; i < cands.size(); ++i) {
    if (!cands[i].report.ok) continue;
    cands[i].report.pruned = cands[i].report.throughput < o.cost.prune_ratio * best_tp;
    if (!cands[i].report.pruned) alive.push_back(i);
  }

  // Wave weight, from the best micro-kernel over several wave ratios.
  std::vector<WaveSample> samples;
  const Candidate& bc = cands[best];
  for (const SizePoint& p : wave_fit_points(res.points, bc.geometry, w, threads,
                                            calibration_point(res.points, bc.geometry, w, threads),
                                            o.cost.wave_fit_points)) {
    const InstanceShape s = instance_shape(bc.geometry, w.size_map(p), threads);
    const double ms = time_at(best, *bc.kernel, p);
    if (ms > 0) samples.push_back({s.wave_ratio(), ms / (s.work * s.padding)});
  }
  const WaveFit fit = fit_wave(samples, o.cost.default_wave_k);
  for (size_t i : alive) {
    Candidate& c = cands[i];
    c.report.throughput = throughput_from(c.calibration, c.calibration_ms, fit.wave_k);
  }

  // Predicted times at every sample point, then the selection.
  CostTable table;
  for (size_t i : alive) {
    std::vector<double> row;
    for (const SizePoint& p : res.points) {
      const InstanceShape s = instance_shape(cands[i].geometry, w.size_map(p), threads);
      row.push_back(
          std::max(kEmptyInstanceMs, predict_ms(s, cands[i].report.throughput, fit.wave_k)));
    }
    table.ms.push_back(std::move(row));
  }
  const Selection sel = select_kernels(table, o.selection);
  res.assignment = sel.assignment;

  DynamicSelection& ds = res.selection;
  std::vector<std::shared_ptr<const BuiltKernel>> kernels;
  std::vector<double> weight(sel.kernels.size(), 0.0);
  for (size_t p = 0; p < sel.assignment.size(); ++p) weight[sel.assignment[p]] += table.weight(p);
  for (int k : sel.kernels) {
    ds.schedules.push_back(cands[alive[k]].report.schedule);
    kernels.push_back(cands[alive[k]].kernel);
  }
  ds.fallback = static_cast<int>(std::max_element(weight.begin(), weight.end()) - weight.begin());
  ds.dispatcher = Dispatcher::build(res.points, sel.assignment, w.ranges(), o.dispatch);
  ds.candidates = static_cast<int>(cands.size());
  ds.pruned = static_cast<int>(std::count_if(cands.begin(), cands.end(),
                                             [](const Candidate& c) { return c.report.pruned; }));
  ds.top_k = sel.top_k;
  ds.wave_k = fit.wave_k;
  ds.predicted_loss = sel.loss;
  ds.worst_point_loss = sel.worst_point_loss;
  res.kernel = DynamicKernel::assemble(w, ds, std::move(kernels));
  for (Candidate& c : cands) res.candidates.push_back(std::move(c.report));
  if (o.records) store_selection(*o.records, w, ds);
  res.tune_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return res;
}

}  // namespace tessera::tune::dynamic
