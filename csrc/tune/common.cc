#include "tune/common.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "compiler/build.h"
#include "ir/eval.h"
#include "util/check.h"

namespace tessera::tune {

namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

int64_t extent_value(const ir::Expr& e, const ir::EvalEnv& env) { return ir::evaluate(e, env).i; }

// The NDArray element accessors convert through double per element, which costs seconds on the
// 100M-element tensors of big GEMMs and GEMVs; float32 data (the common case) takes these paths.
runtime::NDArray random_array(ir::DType dtype, std::vector<int64_t> shape, uint64_t seed) {
  if (dtype != ir::DType::kFloat32) return runtime::NDArray::random(dtype, std::move(shape), seed);
  runtime::NDArray a(dtype, std::move(shape));
  float* p = a.f32();
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (int64_t i = 0, n = a.numel(); i < n; ++i) {
    // splitmix64: uniform in [-1, 1)
    uint64_t z = (x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    p[i] = static_cast<float>(static_cast<double>(z >> 11) * 0x1.0p-52 - 1.0);
  }
  return a;
}

void fill_sentinel(runtime::NDArray& a) {
  if (a.dtype == ir::DType::kFloat32) {
    std::fill(a.f32(), a.f32() + a.numel(), 12345.0f);
  } else {
    a.fill(12345.0);
  }
}

double max_abs_finite(const runtime::NDArray& a) {
  double m = 0;
  const int64_t n = a.numel();
  if (a.dtype == ir::DType::kFloat32) {
    const float* p = a.f32();
    for (int64_t k = 0; k < n; ++k) {
      if (std::isfinite(p[k])) m = std::max(m, static_cast<double>(std::fabs(p[k])));
    }
    return m;
  }
  for (int64_t k = 0; k < n; ++k) {
    double v = std::fabs(a.get(k));
    if (std::isfinite(v)) m = std::max(m, v);
  }
  return m;
}

runtime::CompareResult compare(const runtime::NDArray& got, const runtime::NDArray& want,
                               double rtol, double atol) {
  if (got.dtype == ir::DType::kFloat32 && want.dtype == ir::DType::kFloat32 &&
      got.shape == want.shape) {
    return runtime::allclose(got.f32(), want.f32(), got.numel(), rtol, atol);
  }
  return runtime::allclose(got, want, rtol, atol);
}

}  // namespace

Task Task::create(const std::vector<ir::Tensor>& outputs, const std::vector<ir::Tensor>& inputs,
                  const std::string& name) {
  Task t;
  t.name = name;
  t.outputs = outputs;
  t.inputs = inputs;
  t.plan = schedule::plan_stages(outputs, inputs);
  t.target = schedule::Target::host();
  return t;
}

double Task::iteration_points() const {
  double total = 0;
  for (const schedule::Stage& s : plan.stages) {
    double p = 1;
    for (const ir::IterVar& iv : s.op->op->axes) {
      p *= iv.extent->is_const_int() ? static_cast<double>(iv.extent->int_value)
                                     : kSymbolicSizeGuess;
    }
    for (const ir::IterVar& iv : s.op->op->reduce_axes) {
      p *= iv.extent->is_const_int() ? static_cast<double>(iv.extent->int_value)
                                     : kSymbolicSizeGuess;
    }
    total += p;
  }
  return total;
}

schedule::KernelSchedule Task::default_schedule() const {
  return schedule::default_schedule(plan, target);
}

CandidateMeasurer::CandidateMeasurer(const Task& task, MeasureConfig config)
    : task_(task), config_(config) {}

CandidateMeasurer::~CandidateMeasurer() = default;

void CandidateMeasurer::prepare() {
  if (prepared_) return;
  auto t0 = std::chrono::steady_clock::now();
  compiler::BuildOptions opts;
  opts.name = task_.name + "_ref";
  opts.target = task_.target;
  compiler::BuiltKernel ref = compiler::build_cpu(task_.outputs, task_.inputs, opts);
  ir::EvalEnv env;
  for (const ir::Var& v : ref.func().size_vars) {
    auto it = task_.sizes.find(v.get());
    int64_t value = it != task_.sizes.end() ? it->second : kSymbolicSizeGuess;
    size_values_.push_back(value);
    env.vars[v.get()] = ir::Scalar::of_int(value);
  }
  auto shape_of = [&](const ir::Tensor& t) {
    std::vector<int64_t> s;
    for (const ir::Expr& d : t->shape) s.push_back(extent_value(d, env));
    return s;
  };
  for (size_t i = 0; i < task_.inputs.size(); ++i) {
    inputs_.push_back(
        random_array(task_.inputs[i]->dtype, shape_of(task_.inputs[i]), config_.seed + i));
  }
  for (const ir::Tensor& o : task_.outputs) {
    expected_.emplace_back(o->dtype, shape_of(o));
    outputs_.emplace_back(o->dtype, shape_of(o));
  }
  std::vector<void*> ptrs;
  for (auto& a : inputs_) ptrs.push_back(a.data());
  for (auto& a : expected_) ptrs.push_back(a.data());
  ref.run(ptrs, size_values_);
  for (auto& a : inputs_) ptrs_.push_back(a.data());
  for (auto& a : outputs_) ptrs_.push_back(a.data());
  for (const runtime::NDArray& e : expected_) {
    atol_.push_back(config_.atol_rel * (1.0 + max_abs_finite(e)));
  }
  reference_ms_ = ms_since(t0);
  prepared_ = true;
}

struct CandidateMeasurer::Prepared {
  std::unique_ptr<compiler::BuiltKernel> kernel;
};

void CandidateMeasurer::run(const Prepared& p) { p.kernel->run(ptrs_, size_values_); }

std::unique_ptr<CandidateMeasurer::Prepared> CandidateMeasurer::build_and_verify(
    const schedule::KernelSchedule& schedule, const std::string& name, CandidateResult* res) {
  try {
    prepare();
  } catch (const std::exception& e) {
    res->error = std::string("reference kernel failed: ") + e.what();
    return nullptr;
  }
  ++num_measured_;
  auto p = std::make_unique<Prepared>();
  auto t0 = std::chrono::steady_clock::now();
  try {
    compiler::BuildOptions opts;
    opts.name = task_.name + "_" + name;
    opts.schedule = schedule;
    opts.target = task_.target;
    p->kernel = std::make_unique<compiler::BuiltKernel>(
        compiler::build_cpu(task_.outputs, task_.inputs, opts));
  } catch (const std::exception& e) {
    res->error = std::string("build failed: ") + e.what();
    return nullptr;
  }
  res->build_ms = ms_since(t0);
  for (auto& a : outputs_) fill_sentinel(a);  // an element the kernel forgets shows up
  try {
    auto r0 = std::chrono::steady_clock::now();
    run(*p);
    res->median_ms = ms_since(r0);
    res->repeats = 1;
  } catch (const std::exception& e) {
    res->error = std::string("run failed: ") + e.what();
    return nullptr;
  }
  for (size_t i = 0; i < outputs_.size(); ++i) {
    runtime::CompareResult c = compare(outputs_[i], expected_[i], config_.rtol, atol_[i]);
    if (!c.ok) {
      res->error =
          "output " + task_.outputs[i]->name + " differs from the default schedule's: " + c.message;
      return nullptr;
    }
  }
  res->ok = true;
  return p;
}

CandidateResult CandidateMeasurer::measure(const schedule::KernelSchedule& schedule,
                                           const std::string& name) {
  CandidateResult res;
  std::unique_ptr<Prepared> p = build_and_verify(schedule, name, &res);
  if (!p) return res;
  runtime::MeasureOptions timing = config_.timing;
  timing.warmup = std::max(0, timing.warmup - 1);  // the verification run warmed up already
  runtime::MeasureResult m = runtime::measure([&] { run(*p); }, timing);
  if (!m.ok) {
    res.ok = false;
    res.error = m.error;
    return res;
  }
  res.median_ms = m.median_ms;
  res.repeats = m.repeats + 1;
  return res;
}

std::vector<CandidateResult> CandidateMeasurer::measure_all(
    const std::vector<schedule::KernelSchedule>& schedules) {
  const size_t n = schedules.size();
  std::vector<CandidateResult> res(n);
  std::vector<std::unique_ptr<Prepared>> prepared(n);
  double fastest = 0;
  for (size_t c = 0; c < n; ++c) {
    prepared[c] = build_and_verify(schedules[c], "c" + std::to_string(c), &res[c]);
    if (prepared[c] && (fastest == 0 || res[c].median_ms < fastest)) fastest = res[c].median_ms;
  }
  std::vector<std::vector<double>> rounds(n);
  auto fail = [&](size_t c, const std::exception& e) {
    res[c].ok = false;
    res[c].error = std::string("run failed: ") + e.what();
    prepared[c].reset();
  };
  for (size_t c = 0; c < n; ++c) {
    if (!prepared[c]) continue;
    // The verification run is a cold one: it wakes the pool's workers, idle for the whole JIT
    // compile, and a sleeping vCPU can take milliseconds to wake (measured here: a 0.1 ms batched
    // GEMM ran 2-20 ms, twice in a row, after 50-200 ms of idling); a big kernel's first run also
    // faults in its buffers (GEMM 2048: 84-119 ms cold, 53 warm). Only a run too long for the
    // first to explain marks a candidate as slow, and only if a warm second run confirms it.
    auto slow = [&] {
      return config_.abandon_factor > 0 && res[c].median_ms > config_.abandon_factor * fastest &&
             res[c].median_ms > config_.abandon_min_ms;
    };
    if (!slow()) continue;
    try {
      const auto r0 = std::chrono::steady_clock::now();
      run(*prepared[c]);
      res[c].median_ms = std::min(res[c].median_ms, ms_since(r0));
      ++res[c].repeats;
    } catch (const std::exception& e) {
      fail(c, e);
      continue;
    }
    if (slow()) {
      res[c].abandoned = true;
      prepared[c].reset();  // keeps its best single run as its time
    }
  }
  // One timing round of candidate c: its median over about round_ms, appended to rounds[c].
  auto time_round = [&](size_t c) {
    std::vector<double> samples;
    double total = 0;
    try {
      // The first call after another candidate ran pays for that switch (caches, the pool's
      // workers waking up); steady-state use does not. Short kernels get an untimed call
      // first and at least two timed ones, so a round's median is a warm time.
      const bool short_kernel = rounds[c].empty() || rounds[c].back() < config_.round_ms;
      if (short_kernel) run(*prepared[c]);
      do {
        auto t0 = std::chrono::steady_clock::now();
        run(*prepared[c]);
        samples.push_back(ms_since(t0));
        total += samples.back();
      } while ((total < config_.round_ms || (short_kernel && samples.size() < 2)) &&
               samples.size() < 1000);
    } catch (const std::exception& e) {
      fail(c, e);
      return false;
    }
    rounds[c].push_back(runtime::summarize_samples(samples).median_ms);
    res[c].repeats += static_cast<int>(samples.size());
    ++res[c].rounds;
    return true;
  };
  // Background load here comes in bursts of seconds that slow some candidates of a round and
  // not others (GEMM 2048: one construct timed its first candidate at 55 ms and the next three,
  // of the same tiling family, at 114-118). So each candidate is timed right next to a reference,
  // the first surviving one (the model's favourite), and ranked by the median of its ratios to
  // it, which a burst spanning both leaves alone; its time is that ratio times the reference's
  // median. The reference is timed after each candidate, and a candidate's ratio is to the mean
  // of the reference's rounds before and after it, so a burst that starts or ends next to the
  // candidate counts half. Should the reference fail, the candidates' own medians are used.
  size_t ref = 0;
  while (ref < n && !prepared[ref]) ++ref;
  bool paired = ref < n;
  std::vector<std::vector<double>> ratios(n);
  // Timing rounds over the candidates marked active, each paired with the reference.
  auto timing_rounds = [&](const std::vector<bool>& active, int count, double budget_ms) {
    const auto start = std::chrono::steady_clock::now();
    for (int r = 0; r < std::max(1, count); ++r) {
      if (r > 0 && ms_since(start) > budget_ms) break;
      // A reference outside the active set still opens each round, so the first candidate's
      // ratio has a reference round right before it.
      if (paired && !active[ref] && (!prepared[ref] || !time_round(ref))) paired = false;
      for (size_t c = 0; c < n; ++c) {
        if (!active[c] || !prepared[c] || !time_round(c) || !paired || c == ref) continue;
        const double t = rounds[c].back(), before = rounds[ref].back();
        if (!prepared[ref] || !time_round(ref)) {
          paired = false;
          continue;
        }
        ratios[c].push_back(t / ((before + rounds[ref].back()) / 2));
      }
    }
  };
  timing_rounds(std::vector<bool>(n, true), config_.rounds, config_.timing_budget_ms);
  // The race: a few rounds decide between candidates within the machine's noise of each other
  // only by luck (GEMM 2048: one candidate timed 43 ms next to others' 55-61 was the slowest
  // pick of five seeds). The best few by ratio so far get more rounds, and all their rounds decide.
  std::vector<std::pair<double, size_t>> ranked;
  for (size_t c = 0; c < n; ++c) {
    if (!prepared[c]) continue;
    const double ratio = c == ref            ? 1.0
                         : ratios[c].empty() ? std::numeric_limits<double>::infinity()
                                             : runtime::summarize_samples(ratios[c]).median_ms;
    ranked.emplace_back(ratio, c);
  }
  const size_t finalists = static_cast<size_t>(std::max(0, config_.finalists));
  if (paired && finalists > 0 && ranked.size() > finalists && config_.final_rounds > 0) {
    std::sort(ranked.begin(), ranked.end());
    std::vector<bool> finalist(n, false);
    for (size_t i = 0; i < finalists; ++i) finalist[ranked[i].second] = true;
    timing_rounds(finalist, config_.final_rounds, config_.final_budget_ms);
  }
  const double ref_ms = paired ? runtime::summarize_samples(rounds[ref]).median_ms : 0;
  for (size_t c = 0; c < n; ++c) {
    if (paired && c != ref && !ratios[c].empty()) {
      res[c].median_ms = runtime::summarize_samples(ratios[c]).median_ms * ref_ms;
    } else if (!rounds[c].empty()) {
      res[c].median_ms = runtime::summarize_samples(rounds[c]).median_ms;
    }
  }
  return res;
}

}  // namespace tessera::tune
