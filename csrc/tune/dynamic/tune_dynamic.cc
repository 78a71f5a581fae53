#include "tune/dynamic/tune_dynamic.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "compiler/compile.h"
#include "runtime/ndarray.h"
#include "runtime/parallel.h"
#include "runtime/verify.h"
#include "schedule/default_schedule.h"
#include "schedule/stage_plan.h"
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
  std::vector<void*> input_pointers() {
    std::vector<void*> p;
    for (auto& a : inputs_) p.push_back(a.data());
    return p;
  }
  // `inputs` (input_pointers, or a kernel's with its packed arguments) then `outputs`.
  static std::vector<void*> pointers(std::vector<void*> inputs,
                                     std::vector<runtime::NDArray>* outputs) {
    for (auto& a : *outputs) inputs.push_back(a.data());
    return inputs;
  }
  std::vector<void*> pointers(const std::vector<void*>& inputs) {
    return pointers(inputs, &outputs_);
  }
  std::vector<runtime::NDArray> fresh_outputs() const { return outputs_; }

 private:
  static std::vector<int64_t> shape_at(const ir::Tensor& t,
                                       const std::map<const ir::ExprNode*, int64_t>& at) {
    std::vector<int64_t> s;
    for (const ir::Expr& d : t->shape) s.push_back(evaluate_extent(d, at));
    return s;
  }
  std::vector<runtime::NDArray> inputs_, outputs_;
};

// One kernel's inputs: the instance buffers' inputs with the constant inputs it reads prepacked
// replaced by their packed copies, made here once (as its callers will make them).
class KernelInputs {
 public:
  KernelInputs() = default;
  KernelInputs(const BuiltKernel& k, const DynamicWorkload& w, InstanceBuffers* buffers)
      : pointers_(buffers->input_pointers()) {
    const PackedConstants packing = PackedConstants::plan({&k}, w.constant_inputs());
    for (const PackedArgument& arg : packing.arguments()) {
      const ir::DType dtype = w.inputs()[static_cast<size_t>(arg.input)]->dtype;
      packed_.emplace_back(dtype, std::vector<int64_t>{arg.numel});
      packing.pack(arg.input, pointers_[static_cast<size_t>(arg.input)], packed_.back().data());
      pointers_[static_cast<size_t>(arg.input)] = packed_.back().data();
    }
    packing.point(0, pointers_.data());
  }
  const std::vector<void*>& pointers() const { return pointers_; }

 private:
  std::vector<runtime::NDArray> packed_;
  std::vector<void*> pointers_;
};

// The largest |value| of the first `n` elements.
template <typename T>
double max_abs(const T* values, int64_t n) {
  double m = 0;
  for (int64_t e = 0; e < n; ++e) m = std::max(m, std::abs(static_cast<double>(values[e])));
  return m;
}

// runtime::allclose of the first `n` elements with atol = atol_rel * (1 + max |want|): typed for
// float and double (a candidate's check compares up to a whole instance's output), through
// doubles for the other dtypes. On a mismatch, allclose's message in *why.
bool close_leading(const runtime::NDArray& got, const runtime::NDArray& want, int64_t n,
                   double rtol, double atol_rel, std::string* why) {
  runtime::CompareResult r;
  if (want.dtype == ir::DType::kFloat32) {
    r = runtime::allclose(got.f32(), want.f32(), n, rtol, atol_rel * (1 + max_abs(want.f32(), n)));
  } else if (want.dtype == ir::DType::kFloat64) {
    r = runtime::allclose(got.f64(), want.f64(), n, rtol, atol_rel * (1 + max_abs(want.f64(), n)));
  } else {
    std::vector<double> g(static_cast<size_t>(n)), x(static_cast<size_t>(n));
    for (int64_t e = 0; e < n; ++e) {
      g[e] = got.get(e);
      x[e] = want.get(e);
    }
    r = runtime::allclose(g.data(), x.data(), n, rtol, atol_rel * (1 + max_abs(x.data(), n)));
  }
  if (!r.ok) *why = r.message;
  return r.ok;
}

// Checks candidates against the reference (the fallback: the rules' schedule over the DAG with
// unbounded sizes) at the sizes the tuner names (verification_points); the reference's outputs are
// computed once per point. Candidates write into one set of scratch outputs, reset before each
// run, of which the instance's prefix is compared.
class Verifier {
 public:
  Verifier(std::shared_ptr<const BuiltKernel> reference, const DynamicWorkload& w,
           InstanceBuffers* buffers, const DynamicTuneOptions& o)
      : reference_(std::move(reference)),
        reference_inputs_(*reference_, w, buffers),
        buffers_(buffers),
        scratch_(buffers->fresh_outputs()),
        rtol_(o.rtol),
        atol_rel_(o.atol_rel) {}

  // Checks `k`, reading `inputs`, at `points`.
  bool check(const BuiltKernel& k, const KernelInputs& inputs, const std::vector<SizePoint>& points,
             std::string* why) {
    for (const SizePoint& p : points) {
      const std::vector<runtime::NDArray>& want = expected(p);
      const std::vector<int64_t> numel = k.kernel()->arg_numels(p);
      const size_t first_output = numel.size() - scratch_.size();
      for (auto& a : scratch_) a.fill(12345.0);  // unwritten elements show as mismatches
      k.run(InstanceBuffers::pointers(inputs.pointers(), &scratch_), p);
      for (size_t o = 0; o < scratch_.size(); ++o) {
        if (!close_leading(scratch_[o], want[o], numel[first_output + o], rtol_, atol_rel_, why)) {
          *why += " at sizes (" + point_text(p) + ")";
          return false;
        }
      }
    }
    return true;
  }

 private:
  const std::vector<runtime::NDArray>& expected(const SizePoint& p) {
    auto it = expected_.find(p);
    if (it == expected_.end()) {
      std::vector<runtime::NDArray> out = buffers_->fresh_outputs();
      reference_->run(InstanceBuffers::pointers(reference_inputs_.pointers(), &out), p);
      it = expected_.emplace(p, std::move(out)).first;
    }
    return it->second;
  }

  std::shared_ptr<const BuiltKernel> reference_;
  KernelInputs reference_inputs_;
  InstanceBuffers* buffers_;
  std::vector<runtime::NDArray> scratch_;
  double rtol_, atol_rel_;
  std::map<SizePoint, std::vector<runtime::NDArray>> expected_;
};

}  // namespace

std::vector<SizePoint> verification_points(const std::vector<SizePoint>& points,
                                           const MicroKernelGeometry& g, const DynamicWorkload& w) {
  SizePoint small, middle;
  for (const SizeRange& r : w.ranges()) {
    small.push_back(r.lo);
    int64_t m = r.lo + (r.hi - r.lo) / 2;
    if (m % 2 == 0 && m + 1 <= r.hi) ++m;
    middle.push_back(m);
  }
  auto cuts = [](int64_t extent, int64_t step) { return step <= 1 || extent % step != 0; };
  const auto middle_sizes = w.size_map(middle);
  const SizePoint* edge = &middle;
  double least = std::numeric_limits<double>::infinity();
  for (const SizePoint& p : points) {
    const auto at = w.size_map(p);
    bool covers = true;
    double work = 1;
    for (size_t a = 0; a < g.extents.size() && covers; ++a) {
      const int64_t n = evaluate_extent(g.extents[a], at);
      work *= static_cast<double>(n);
      if (g.extents[a]->is_const_int()) continue;
      covers = n > 2 * g.tiles[a] && cuts(n, g.tiles[a]) && cuts(n, g.granules[a]) &&
               n <= evaluate_extent(g.extents[a], middle_sizes);
    }
    if (covers && work < least) {
      least = work;
      edge = &p;
    }
  }
  if (*edge == small) return {small};
  return {small, *edge};
}

namespace {

// Candidate schedules with the tuning's edge mode, deduplicated by what they build.
class CandidatePool {
 public:
  explicit CandidatePool(std::optional<schedule::EdgeMode> edge) : edge_(edge) {}

  void add(KernelSchedule s, const std::string& origin) {
    if (edge_) {
      for (schedule::StageAnnotation& st : s.stages) st.edge = *edge_;
    }
    if (!seen_.insert(s.stages_text()).second) return;
    CandidateReport r;
    r.schedule = std::move(s);
    r.origin = origin;
    reports_.push_back(std::move(r));
  }
  std::vector<CandidateReport>& reports() { return reports_; }

 private:
  std::optional<schedule::EdgeMode> edge_;
  std::set<std::string> seen_;
  std::vector<CandidateReport> reports_;
};

// Search mode's tuning of the largest instance, the weights read prepacked as they will run.
compiler::CompileReport search_largest(const DynamicWorkload& w, const DynamicTuneOptions& o) {
  const DagCopy inst = w.instantiate(w.largest());
  compiler::CompileRequest req;
  req.name = w.name() + "_search";
  req.tune = compiler::TuneMode::kSearch;
  req.trials = o.search_trials;
  req.seed = o.construct.seed;
  req.records = o.records;
  req.constant_inputs = w.constant_inputs();
  return compiler::compile(inst.outputs, inst.inputs, req).report;
}

// The `n` fastest verified candidates a tuner measured, fastest first.
std::vector<KernelSchedule> fastest_measured(const compiler::CompileReport& r, int n) {
  std::vector<const compiler::CandidateReport*> ok;
  for (const compiler::CandidateReport& c : r.candidates) {
    if (c.ok && c.median_ms > 0) ok.push_back(&c);
  }
  std::stable_sort(ok.begin(), ok.end(),
                   [](const auto* a, const auto* b) { return a->median_ms < b->median_ms; });
  std::vector<KernelSchedule> out;
  for (size_t i = 0; i < ok.size() && static_cast<int>(i) < n; ++i) out.push_back(ok[i]->schedule);
  return out;
}

void gather_candidates(const DynamicWorkload& w, const DynamicTuneOptions& o,
                       const KernelSchedule& rules, CandidatePool* pool, DynamicTuneResult* res) {
  pool->add(rules, "rules");
  for (const KernelSchedule& s : o.candidates) pool->add(s, "given");
  if (!o.construct_candidates) return;
  for (const KernelSchedule& s : rules_by_vote(w, o.rules_vote_points, o.rules_votes)) {
    pool->add(s, "rules-vote");
  }
  std::vector<KernelSchedule> best_ranked;  // each representative's top mutate_top
  for (const SizePoint& rep : representative_points(w, o.representatives)) {
    const DagCopy inst = w.instantiate(rep);
    Task task = Task::create(inst.outputs, inst.inputs, w.name());
    task.constant_inputs = w.constant_input_names();  // ranked as they will run: prepacked
    const gensor::ConstructResult r = gensor::construct(task, o.construct);
    int ranked = 0;
    for (const gensor::ConstructCandidate& c : r.candidates) {  // best-ranked first
      if (c.measured && !c.result.ok) continue;
      pool->add(c.schedule, "construct@" + point_text(rep));
      if (ranked++ < o.mutate_top) best_ranked.push_back(c.schedule);
    }
  }
  if (o.search_trials > 0) {
    const compiler::CompileReport searched = search_largest(w, o);
    res->searched = searched.schedule;
    res->search_measured = searched.trials;
    const std::string origin = "search@" + point_text(w.largest());
    pool->add(searched.schedule, origin);
    best_ranked.push_back(searched.schedule);
    for (const KernelSchedule& s : fastest_measured(searched, o.search_top - 1)) {
      pool->add(s, origin);
    }
  }
  const auto at = w.size_map(w.largest());
  for (const KernelSchedule& s : best_ranked) {
    const schedule::StagePlan plan = schedule::plan_stages(w.outputs(), w.inputs(), s.plan);
    if (plan.stages.size() != s.stages.size()) continue;
    for (const KernelSchedule& m : tile_mutations(plan, s, at)) pool->add(m, "mutation");
  }
}

// The sample point where the micro-kernel runs closest to full waves without padding; of the
// points as close as that, the one at the lower quartile of work (the largest would be the
// steadiest timing, but it is the most expensive one to time, and the overhead is fitted apart
// anyway: a micro-kernel made for few rows is slow at the median).
const SizePoint& calibration_point(const std::vector<SizePoint>& points,
                                   const MicroKernelGeometry& g, const DynamicWorkload& w,
                                   int threads) {
  double least = std::numeric_limits<double>::infinity();
  std::vector<std::pair<double, size_t>> closest;  // (work, point)
  for (size_t i = 0; i < points.size(); ++i) {
    const InstanceShape s = instance_shape(g, w.size_map(points[i]), threads);
    if (s.work <= 0) continue;
    const double excess = s.padding * s.wave_ratio();
    if (excess < least - 1e-12) {
      least = excess;
      closest.clear();
    }
    if (excess <= least + 1e-12) closest.push_back({s.work, i});
  }
  if (closest.empty()) return points.back();
  std::sort(closest.begin(), closest.end());
  return points[closest[closest.size() / 4].second];
}

// The sample point with the least positive work: where the per-call overhead shows most.
const SizePoint& smallest_point(const std::vector<SizePoint>& points, const MicroKernelGeometry& g,
                                const DynamicWorkload& w, int threads) {
  size_t best = 0;
  double least = -1;
  for (size_t i = 0; i < points.size(); ++i) {
    const double work = instance_shape(g, w.size_map(points[i]), threads).work;
    if (work > 0 && (least < 0 || work < least)) {
      least = work;
      best = i;
    }
  }
  return points[best];
}

// The sample point whose work is nearest the geometric mean of the works at `a` and `b` (on a
// log scale: the sizes between the smallest and the calibration point span decades).
const SizePoint& middle_point(const std::vector<SizePoint>& points, const MicroKernelGeometry& g,
                              const DynamicWorkload& w, int threads, const SizePoint& a,
                              const SizePoint& b) {
  const auto work = [&](const SizePoint& p) {
    return instance_shape(g, w.size_map(p), threads).work;
  };
  const double target = std::sqrt(work(a) * work(b));
  size_t best = 0;
  double nearest = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < points.size(); ++i) {
    const double wk = work(points[i]);
    if (wk <= 0) continue;
    const double d = std::abs(std::log(wk / target));
    if (d < nearest) {
      nearest = d;
      best = i;
    }
  }
  return points[best];
}

// Points for fitting k, `n` at most, none already timed (`have`), each with at least
// `min_work`: first one per wave ratio not met yet, the largest ratios (the fewest tiles) first;
// then, so that overhead and throughput separate from k when the ratios are few, others spread
// over the remaining points.
std::vector<SizePoint> wave_fit_points(const std::vector<SizePoint>& points,
                                       const MicroKernelGeometry& g, const DynamicWorkload& w,
                                       int threads, const std::vector<SizePoint>& have, int n,
                                       double min_work) {
  std::vector<std::pair<double, size_t>> by_ratio;
  for (size_t i = 0; i < points.size(); ++i) {
    const InstanceShape s = instance_shape(g, w.size_map(points[i]), threads);
    const bool timed = std::find(have.begin(), have.end(), points[i]) != have.end();
    if (s.work > 0 && s.work >= min_work && !timed) by_ratio.push_back({s.wave_ratio(), i});
  }
  std::stable_sort(by_ratio.begin(), by_ratio.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<double> ratios;
  for (const SizePoint& p : have) {
    ratios.push_back(instance_shape(g, w.size_map(p), threads).wave_ratio());
  }
  std::vector<SizePoint> chosen;
  std::vector<size_t> rest;
  for (const auto& [ratio, i] : by_ratio) {
    const bool fresh = std::none_of(ratios.begin(), ratios.end(),
                                    [&](double r) { return std::abs(r - ratio) < 1e-9; });
    if (fresh && static_cast<int>(chosen.size()) < n) {
      chosen.push_back(points[i]);
      ratios.push_back(ratio);
    } else {
      rest.push_back(i);
    }
  }
  const size_t room = static_cast<size_t>(std::max<int>(0, n - static_cast<int>(chosen.size())));
  for (size_t j = 0; j < room && j < rest.size(); ++j) {
    chosen.push_back(points[rest[j * rest.size() / room]]);
  }
  return chosen;
}

// A parallel loop body that does nothing: timing it leaves the pool's round trip.
void no_work(void*, int64_t, int64_t) {}

KernelSchedule serial_copy(KernelSchedule s) {
  for (schedule::StageAnnotation& st : s.stages) st.parallel = false;
  return s;
}

bool runs_parallel(const KernelSchedule& s) {
  return std::any_of(s.stages.begin(), s.stages.end(),
                     [](const schedule::StageAnnotation& st) { return st.parallel; });
}

// The tuning itself, one step per member function (see tune_dynamic.h for the steps).
class DynamicTuner {
 public:
  DynamicTuner(const DynamicWorkload& w, const DynamicTuneOptions& o, DynamicTuneResult* res)
      : w_(w),
        o_(o),
        res_(res),
        threads_(runtime::get_num_threads()),
        largest_(w.size_map(w.largest())),
        buffers_(w, o.seed) {
    res_->points = sample_points(w, o.max_points);
    timer_ = o.timer;
    if (!timer_) {
      timer_ = [this](size_t c, const BuiltKernel& k, const SizePoint& p) {
        std::vector<void*> ptrs = buffers_.pointers(cands_[c].inputs.pointers());
        runtime::MeasureOptions timing = o_.timing;
        if (warm_) timing.warmup = 0;
        return runtime::measure([&] { k.run(ptrs, p); }, timing).median_ms;
      };
    }
  }

  void run() {
    auto t = std::chrono::steady_clock::now();
    auto phase = [&](const char* name) {
      const auto now = std::chrono::steady_clock::now();
      res_->phase_s.emplace_back(name, std::chrono::duration<double>(now - t).count());
      t = now;
    };
    CandidatePool pool(o_.edge);
    gather_candidates(w_, o_, rules_schedule(), &pool, res_);
    phase("candidates");
    add_candidates(std::move(pool.reports()), /*with_fallback=*/true);
    phase("build_time");
    prune();
    sample_contenders_at_largest();
    add_serial_variants();
    phase("serial");
    fit_wave_weight();
    select();
    phase("select");
  }

 private:
  struct Candidate {
    CandidateReport report;
    std::shared_ptr<const BuiltKernel> kernel;
    KernelInputs inputs;  // what `kernel` reads
    MicroKernelGeometry geometry;
    std::vector<TimeSample> samples;
    std::vector<SizePoint> timed_points;  // where each sample was taken
  };

  double time_at(size_t c, const BuiltKernel& k, const SizePoint& p) {
    ++res_->timings;
    return timer_(c, k, p);
  }

  // Times candidate `c` at `p` and keeps the sample.
  void sample(size_t c, const SizePoint& p) { keep_sample(c, p, time_at(c, *cands_[c].kernel, p)); }

  void keep_sample(size_t c, const SizePoint& p, double ms) {
    Candidate& cand = cands_[c];
    cand.samples.push_back({instance_shape(cand.geometry, w_.size_map(p), threads_), ms});
    cand.timed_points.push_back(p);
  }

  // One call of candidate `c` at `p`, timed (ms); with a timer in the options, the timer.
  double probe_at(size_t c, const SizePoint& p) {
    const BuiltKernel& k = *cands_[c].kernel;
    if (o_.timer) return time_at(c, k, p);
    ++res_->timings;
    std::vector<void*> ptrs = buffers_.pointers(cands_[c].inputs.pointers());
    const auto start = std::chrono::steady_clock::now();
    k.run(ptrs, p);
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
        .count();
  }

  // The least predicted time at `p` among the candidates timed so far (infinity: none yet).
  double best_prediction(const SizePoint& p) const {
    double best = std::numeric_limits<double>::infinity();
    for (const Candidate& c : cands_) {
      if (!c.report.ok) continue;
      const InstanceShape s = instance_shape(c.geometry, w_.size_map(p), threads_);
      best = std::min(best, predict_ms(s, c.report.model, o_.cost.default_wave_k));
    }
    return best;
  }

  // Times candidate `c` at its calibration point `p`: one call first, which stands as the sample
  // when it is probe_slowdown times the best prediction there or slower (a micro-kernel made for
  // few rows is far slower there; it can only win at small sizes, which its small-point
  // sample measures), else the full measurement, with the probe as its warm-up.
  void calibrate(size_t c, const SizePoint& p) {
    const double best = best_prediction(p);
    if (std::isfinite(best)) {
      const double once = probe_at(c, p);
      if (once >= o_.cost.probe_slowdown * best) {
        keep_sample(c, p, once);
        return;
      }
      warm_ = true;
    }
    sample(c, p);
    warm_ = false;
  }

  // A candidate's kernel as built ahead of its verification (or why the build failed).
  struct Built {
    std::shared_ptr<const BuiltKernel> kernel;
    std::string error;
  };

  KernelSchedule rules_schedule() const {
    const schedule::StagePlan plan = schedule::plan_stages(w_.outputs(), w_.inputs());
    return schedule::default_schedule(plan, schedule::Target::host());
  }

  // Every candidate built at once, on as many threads as the kernels run on (builds are
  // independent; nothing is timed meanwhile). With `with_fallback`, job 0 builds the fallback
  // into reference_ (every candidate is checked against it); it goes first because it builds
  // slowest (unbounded sizes), so the other jobs fill the other threads meanwhile.
  std::vector<Built> build_all(const std::vector<CandidateReport>& reports, bool with_fallback) {
    std::vector<Built> out(reports.size());
    const size_t first = with_fallback ? 1 : 0;  // job of reports[0]
    std::string fallback_error;
    run_jobs(reports.size() + first, static_cast<size_t>(std::max(1, threads_)), [&](size_t j) {
      try {
        if (j < first) {
          reference_ = DynamicKernel::build_fallback(w_);
          return;
        }
        const size_t i = j - first;
        out[i].kernel = DynamicKernel::build_micro_kernel(
            w_, reports[i].schedule, w_.name() + "_cand" + std::to_string(cands_.size() + i));
      } catch (const std::exception& e) {
        (j < first ? fallback_error : out[j - first].error) = e.what();
      }
    });
    if (with_fallback) {
      TESSERA_CHECK(fallback_error.empty()) << "dynamic tuning of " << w_.name()
                                            << ": the fallback failed to build: " << fallback_error;
      verifier_ = std::make_unique<Verifier>(reference_, w_, &buffers_, o_);
    }
    return out;
  }

  // Builds every candidate at once, then verifies and times each one in order.
  void add_candidates(std::vector<CandidateReport> reports, bool with_fallback = false) {
    const std::vector<Built> built = build_all(reports, with_fallback);
    for (size_t i = 0; i < reports.size(); ++i) add_candidate(std::move(reports[i]), built[i]);
  }

  // Verifies the kernel `built` holds (or reports its build error) and times it on the fullest
  // wave, the smallest instance and one between (by work, geometrically).
  void add_candidate(CandidateReport r, const Built& built) {
    const size_t index = cands_.size();
    cands_.push_back(Candidate{std::move(r), nullptr, {}, {}, {}, {}});
    Candidate& c = cands_.back();
    try {
      if (!built.error.empty()) throw Error(built.error);
      c.kernel = built.kernel;
      c.inputs = KernelInputs(*c.kernel, w_, &buffers_);
      c.geometry = geometry_of(c.kernel->plan(), c.kernel->schedule(), largest_);
      if (!verifier_->check(*c.kernel, c.inputs, verification_points(res_->points, c.geometry, w_),
                            &c.report.error)) {
        c.kernel.reset();
        c.inputs = {};
        return;
      }
      const SizePoint& full = calibration_point(res_->points, c.geometry, w_, threads_);
      const SizePoint& small = smallest_point(res_->points, c.geometry, w_, threads_);
      calibrate(index, full);
      if (small != full) sample(index, small);
      const SizePoint& mid = middle_point(res_->points, c.geometry, w_, threads_, small, full);
      if (mid != small && mid != full) sample(index, mid);
      c.report.model = fit_kernel(c.samples, o_.cost.default_wave_k);
      c.report.ok = true;
    } catch (const std::exception& e) {
      c.report.error = e.what();
      c.kernel.reset();
      c.inputs = {};
    }
  }

  // Predicted time of candidate `c` at every sample point with wave weight `k`.
  std::vector<double> predictions(const Candidate& c, double k) const {
    std::vector<double> row;
    for (const SizePoint& p : res_->points) row.push_back(prediction(c, p, k));
    return row;
  }
  double prediction(const Candidate& c, const SizePoint& p, double k) const {
    const InstanceShape s = instance_shape(c.geometry, w_.size_map(p), threads_);
    return std::max(kEmptyInstanceMs, predict_ms(s, c.report.model, k));
  }

  // The points the dispatcher is built from, with the selected kernel of each. Ranges whose box
  // holds at most max_labelled_points: every point, each labelled with the selected kernel
  // predicted fastest there (a size between two sample points can sit on the other side of a
  // register tile's edge than both, e.g. 8 rows between samples at 5 and 9 for tiles of 8 and 9
  // rows; with B x T rows, T = 7 between samples at 1 and 18). Else the sample points with the
  // selection's own assignment.
  std::pair<std::vector<SizePoint>, std::vector<int>> dispatch_points(
      const std::vector<size_t>& selected, const Selection& sel) const {
    double box = 1;
    for (const SizeRange& r : w_.ranges()) box *= static_cast<double>(r.count());
    const int64_t most = o_.dispatch.max_labelled_points;
    if (box > static_cast<double>(most)) return {res_->points, sel.assignment};
    std::vector<SizePoint> points = sample_points(w_, most);  // every point of the box
    std::vector<int> labels;
    for (const SizePoint& p : points) {
      double best = std::numeric_limits<double>::infinity();
      labels.push_back(0);
      for (size_t k = 0; k < selected.size(); ++k) {  // ties: the lower index, as the selection
        const double ms = prediction(cands_[selected[k]], p, wave_k_);
        if (ms < best) {
          best = ms;
          labels.back() = static_cast<int>(k);
        }
      }
    }
    return {points, labels};
  }

  // Predicted times (default wave weight) of the verified, unpruned candidates at every sample
  // point (an empty row for the others), and the least per point.
  struct PredictionTable {
    std::vector<std::vector<double>> ms;
    std::vector<double> best;
  };
  PredictionTable predict_alive() const {
    PredictionTable t;
    t.ms.resize(cands_.size());
    t.best.assign(res_->points.size(), std::numeric_limits<double>::infinity());
    for (size_t i = 0; i < cands_.size(); ++i) {
      if (!cands_[i].report.ok || cands_[i].report.pruned) continue;
      t.ms[i] = predictions(cands_[i], o_.cost.default_wave_k);
      for (size_t p = 0; p < t.best.size(); ++p) t.best[p] = std::min(t.best[p], t.ms[i][p]);
    }
    return t;
  }

  // Early pruning: candidates predicted far from the best at every size.
  void prune() {
    TESSERA_CHECK(
        std::any_of(cands_.begin(), cands_.end(), [](const Candidate& c) { return c.report.ok; }))
        << "dynamic tuning of " << w_.name() << ": no candidate verified";
    const PredictionTable t = predict_alive();
    for (size_t i = 0; i < cands_.size(); ++i) {
      if (!cands_[i].report.ok) continue;
      double nearest = std::numeric_limits<double>::infinity();
      for (size_t p = 0; p < t.best.size(); ++p)
        nearest = std::min(nearest, t.ms[i][p] / t.best[p]);
      cands_[i].report.pruned = nearest > o_.cost.prune_slowdown;
      if (cands_[i].report.pruned) cands_[i].inputs = {};  // never run again: its packed copies go
    }
  }

  // Times the largest_contenders candidates predicted fastest at the largest instance there as
  // well (those not timed there yet), and refits their models.
  void sample_contenders_at_largest() {
    const SizePoint largest = w_.largest();
    const auto at = std::find(res_->points.begin(), res_->points.end(), largest);
    if (at == res_->points.end()) return;
    const size_t p = static_cast<size_t>(at - res_->points.begin());
    const PredictionTable t = predict_alive();
    std::vector<std::pair<double, size_t>> order;  // (predicted ms at the largest, candidate)
    for (size_t i = 0; i < cands_.size(); ++i) {
      if (!t.ms[i].empty()) order.push_back({t.ms[i][p], i});
    }
    std::stable_sort(order.begin(), order.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    order.resize(std::min(order.size(), static_cast<size_t>(o_.cost.largest_contenders)));
    for (const auto& [ms, i] : order) {
      Candidate& c = cands_[i];
      const auto& timed = c.timed_points;
      if (std::find(timed.begin(), timed.end(), largest) != timed.end()) continue;
      sample(i, largest);
      c.report.model = fit_kernel(c.samples, o_.cost.default_wave_k);
    }
  }

  // The thread pool's round trip per parallel call (ms): the option, else measured here.
  double pool_call_ms() const {
    if (o_.pool_call_ms) return *o_.pool_call_ms;
    runtime::MeasureOptions m;
    m.warmup = 3;
    m.min_repeats = 20;
    m.min_time_ms = 2;
    m.max_repeats = 100000;
    const int64_t tasks = threads_;
    return runtime::measure([tasks] { runtime::parallel_for(tasks, no_work, nullptr); }, m)
        .median_ms;
  }

  // Serial copies of the parallel micro-kernels predicted fastest (geometric mean of their
  // slowdown against the best) at the sample points where the pool's round trip is at least
  // serial_min_pool_share of the best predicted time; none where it never is (the round trip is
  // what a serial copy surely saves).
  void add_serial_variants() {
    if (threads_ <= 1 || o_.serial_variants <= 0) return;
    const PredictionTable t = predict_alive();
    const double pool_ms = pool_call_ms();
    std::vector<size_t> pool_bound;  // points
    for (size_t p = 0; p < t.best.size(); ++p) {
      if (pool_ms >= o_.cost.serial_min_pool_share * t.best[p]) pool_bound.push_back(p);
    }
    if (pool_bound.empty()) return;
    std::vector<std::pair<double, size_t>> order;  // (mean log slowdown, candidate)
    for (size_t i = 0; i < cands_.size(); ++i) {
      if (t.ms[i].empty() || !runs_parallel(cands_[i].report.schedule)) continue;
      double log_sum = 0;
      for (size_t p : pool_bound) log_sum += std::log(t.ms[i][p] / t.best[p]);
      order.push_back({log_sum / static_cast<double>(pool_bound.size()), i});
    }
    std::stable_sort(order.begin(), order.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    std::set<std::string> seen;
    for (const Candidate& c : cands_) seen.insert(c.report.schedule.stages_text());
    std::vector<CandidateReport> serial;
    for (const auto& ranked : order) {
      const size_t i = ranked.second;
      if (static_cast<int>(serial.size()) >= o_.serial_variants) break;
      CandidateReport r;
      r.schedule = serial_copy(cands_[i].report.schedule);
      r.origin = "serial";
      if (!seen.insert(r.schedule.stages_text()).second) continue;
      serial.push_back(std::move(r));
    }
    add_candidates(std::move(serial));
  }

  // The largest wave ratio the micro-kernel meets over the sample points minus the least.
  double wave_ratio_spread(const Candidate& c) const {
    double least = std::numeric_limits<double>::infinity(), most = 0;
    for (const SizePoint& p : res_->points) {
      const InstanceShape s = instance_shape(c.geometry, w_.size_map(p), threads_);
      if (s.work <= 0) continue;
      least = std::min(least, s.wave_ratio());
      most = std::max(most, s.wave_ratio());
    }
    return most > 0 ? most - least : 0;
  }

  // k from the fastest parallel micro-kernel whose wave ratios spread wave_fit_min_spread or
  // more (one whose tiles fill the pool about alike at every size says nothing about k, and k
  // changes none of its predictions by much), then every candidate's throughput and overhead
  // refitted with it. Without such a micro-kernel k stays the default.
  void fit_wave_weight() {
    wave_k_ = o_.cost.default_wave_k;
    size_t best = cands_.size();
    for (size_t i = 0; i < cands_.size(); ++i) {
      const Candidate& c = cands_[i];
      if (!c.report.ok || c.report.pruned || !c.geometry.parallel) continue;
      if (wave_ratio_spread(c) < o_.cost.wave_fit_min_spread) continue;
      if (best == cands_.size() ||
          c.report.model.throughput > cands_[best].report.model.throughput) {
        best = i;
      }
    }
    if (best < cands_.size() && threads_ > 1) {
      Candidate& bc = cands_[best];
      const double largest_work = instance_shape(bc.geometry, largest_, threads_).work;
      for (const SizePoint& p :
           wave_fit_points(res_->points, bc.geometry, w_, threads_, bc.timed_points,
                           o_.cost.wave_fit_points, o_.cost.wave_fit_min_work * largest_work)) {
        sample(best, p);
      }
      wave_k_ = fit_wave(bc.samples, o_.cost.default_wave_k).wave_k;
    }
    for (Candidate& c : cands_) {
      if (c.report.ok) c.report.model = fit_kernel(c.samples, wave_k_);
    }
  }

  void select() {
    std::vector<size_t> alive;
    for (size_t i = 0; i < cands_.size(); ++i) {
      if (cands_[i].report.ok && !cands_[i].report.pruned) alive.push_back(i);
    }
    CostTable table;
    for (size_t i : alive) {
      table.ms.push_back(predictions(cands_[i], wave_k_));
    }
    const Selection sel = select_kernels(table, o_.selection);
    res_->assignment = sel.assignment;

    DynamicSelection& ds = res_->selection;
    std::vector<std::shared_ptr<const BuiltKernel>> kernels;
    std::vector<size_t> selected;  // candidates
    for (int k : sel.kernels) {
      selected.push_back(alive[k]);
      ds.schedules.push_back(cands_[alive[k]].report.schedule);
      kernels.push_back(cands_[alive[k]].kernel);
    }
    const auto [points, labels] = dispatch_points(selected, sel);
    ds.dispatcher = Dispatcher::build(points, labels, w_.ranges(), o_.dispatch);
    ds.candidates = static_cast<int>(cands_.size());
    ds.pruned = static_cast<int>(std::count_if(cands_.begin(), cands_.end(),
                                               [](const Candidate& c) { return c.report.pruned; }));
    ds.top_k = sel.top_k;
    ds.wave_k = wave_k_;
    ds.predicted_loss = sel.loss;
    ds.worst_point_loss = sel.worst_point_loss;
    res_->kernel = DynamicKernel::assemble(w_, ds, std::move(kernels), reference_);
    for (Candidate& c : cands_) res_->candidates.push_back(std::move(c.report));
  }

  const DynamicWorkload& w_;
  const DynamicTuneOptions& o_;
  DynamicTuneResult* res_;
  const int threads_;
  const std::map<const ir::ExprNode*, int64_t> largest_;
  InstanceBuffers buffers_;
  std::shared_ptr<const BuiltKernel> reference_;  // the fallback, built with the candidates
  std::unique_ptr<Verifier> verifier_;
  SizeTimer timer_;
  std::vector<Candidate> cands_;
  double wave_k_ = 1;
  bool warm_ = false;  // the next timing's kernel and point just ran: no warm-up call
};

}  // namespace

std::vector<SizePoint> representative_points(const DynamicWorkload& w, int n) {
  TESSERA_CHECK(n >= 1) << "representative_points needs n >= 1";
  std::vector<SizePoint> reps;
  // The largest first; with n >= 2 the smallest is the last (its micro-kernel can differ in
  // kind: a row times a weight is a dot product per output, not a tiled matmul).
  for (int i = n; i >= 1; --i) {
    SizePoint p;
    for (const SizeRange& r : w.ranges()) {
      p.push_back(n == 1 ? r.hi : r.lo + (r.hi - r.lo) * (i - 1) / (n - 1));
    }
    if (std::find(reps.begin(), reps.end(), p) == reps.end()) reps.push_back(p);
  }
  return reps;
}

std::vector<KernelSchedule> rules_by_vote(const DynamicWorkload& w, int64_t points, int votes) {
  std::map<std::string, std::pair<double, KernelSchedule>> tally;  // by stages_text
  for (const SizePoint& p : sample_points(w, points)) {
    const DagCopy inst = w.instantiate(p);
    Task task = Task::create(inst.outputs, inst.inputs, w.name());
    task.constant_inputs = w.constant_input_names();
    KernelSchedule s = task.default_schedule();
    double work = 1;
    for (int64_t v : p) work *= static_cast<double>(v);
    auto& vote = tally[s.stages_text()];
    vote.first += work;
    vote.second = std::move(s);
  }
  std::vector<std::pair<double, const KernelSchedule*>> ranked;
  for (const auto& [text, vote] : tally) ranked.push_back({vote.first, &vote.second});
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<KernelSchedule> out;
  for (size_t i = 0; i < ranked.size() && static_cast<int>(i) < votes; ++i) {
    out.push_back(*ranked[i].second);
  }
  return out;
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
    if (std::optional<DynamicSelection> stored = load_selection(*o.records, w, o.search_trials)) {
      res.selection = *stored;
      res.kernel = DynamicKernel::build(w, res.selection);
      res.from_records = true;
      return res;
    }
  }
  DynamicTuner(w, o, &res).run();
  if (o.records) store_selection(*o.records, w, res.selection, o.search_trials);
  res.tune_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return res;
}

}  // namespace tessera::tune::dynamic
