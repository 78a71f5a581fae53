#include "tune/common.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <thread>

#include "compiler/build.h"
#include "ir/eval.h"
#include "runtime/paired_timing.h"
#include "runtime/parallel.h"
#include "schedule/prepack.h"
#include "schedule/tuning_policy.h"
#include "util/check.h"
#include "util/counters.h"

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
  Task t = from_plan(schedule::plan_stages(outputs, inputs), name);
  t.outputs = outputs;
  t.inputs = inputs;
  return t;
}

Task Task::from_plan(schedule::StagePlan plan, const std::string& name) {
  Task t;
  t.name = name;
  t.outputs = plan.outputs;
  t.inputs = plan.inputs;
  t.plan = std::move(plan);
  t.target = schedule::Target::host();
  return t;
}

const schedule::StagePlan& Task::plan_for(const schedule::PlanChoices& choices) const {
  if (choices == plan.choices) return plan;
  std::lock_guard<std::mutex> lock(plan_cache->mutex);
  std::unique_ptr<const schedule::StagePlan>& p = plan_cache->plans[choices.text()];
  if (p == nullptr) {
    p = std::make_unique<const schedule::StagePlan>(
        schedule::plan_stages(outputs, inputs, choices));
  }
  return *p;
}

double Task::iteration_points() const {
  double total = 0;
  for (const schedule::Stage& s : plan.stages)
    total += schedule::stage_points(s, kSymbolicSizeGuess);
  return total;
}

double Task::flops() const { return 2 * schedule::reduce_points(plan, kSymbolicSizeGuess); }

schedule::KernelSchedule Task::default_schedule() const {
  return as_run(schedule::default_schedule(plan, target));
}

std::vector<std::string> Task::prepacked_inputs(const schedule::KernelSchedule& s) const {
  if (constant_inputs.empty()) return {};
  return schedule::prepackable_inputs(plan_for(s.plan), s, constant_inputs);
}

std::vector<std::string> Task::prepacked_inputs_or_none(const schedule::KernelSchedule& s) const {
  try {
    return prepacked_inputs(s);
  } catch (const std::exception&) {
    return {};
  }
}

compiler::BuiltKernel Task::build(const schedule::KernelSchedule& s,
                                  const std::string& name) const {
  return compiler::build_cpu(plan_for(s.plan), s, name, {}, prepacked_inputs(s));
}

schedule::KernelSchedule Task::as_run(schedule::KernelSchedule s) const {
  if (!parallel) {
    for (schedule::StageAnnotation& st : s.stages) st.parallel = false;
  }
  return s;
}

CandidateMeasurer::CandidateMeasurer(const Task& task, MeasureConfig config)
    : task_(task), config_(config) {}

CandidateMeasurer::~CandidateMeasurer() = default;

std::shared_ptr<const compiler::BuiltKernel> CandidateMeasurer::reference_kernel() {
  prepare();
  return reference_;
}

void CandidateMeasurer::build_reference() {
  if (reference_) return;
  const schedule::KernelSchedule ref_schedule = task_.default_schedule();
  reference_schedule_ = ref_schedule.stages_text();
  reference_ =
      std::make_shared<const compiler::BuiltKernel>(task_.build(ref_schedule, task_.name + "_ref"));
}

void CandidateMeasurer::prepare() {
  if (prepared_) return;
  auto t0 = std::chrono::steady_clock::now();
  build_reference();
  const compiler::BuiltKernel& ref = *reference_;
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
  const std::vector<ir::Tensor>& ins = task_.plan.inputs;
  for (size_t i = 0; i < ins.size(); ++i) {
    inputs_.push_back(random_array(ins[i]->dtype, shape_of(ins[i]), config_.seed + i));
  }
  for (const ir::Tensor& o : task_.plan.outputs) {
    expected_.emplace_back(o->dtype, shape_of(o));
    outputs_.emplace_back(o->dtype, shape_of(o));
  }
  for (auto& a : inputs_) ptrs_.push_back(a.data());
  for (auto& a : outputs_) ptrs_.push_back(a.data());
  std::shared_ptr<const KernelArgs> expected_args = args_for(ref, expected_);
  std::vector<void*> ptrs;
  for (auto& a : inputs_) ptrs.push_back(a.data());
  for (auto& a : expected_) ptrs.push_back(a.data());
  ref.run(expected_args ? expected_args->ptrs : ptrs, size_values_);
  reference_args_ = args_for(ref, outputs_);
  for (const runtime::NDArray& e : expected_) {
    atol_.push_back(config_.atol_rel * (1.0 + max_abs_finite(e)));
  }
  reference_ms_ = ms_since(t0);
  prepared_ = true;
}

std::shared_ptr<const KernelArgs> CandidateMeasurer::args_for(
    const compiler::BuiltKernel& k, std::vector<runtime::NDArray>& outputs) {
  if (k.prepacks().empty()) return nullptr;
  auto args = std::make_shared<KernelArgs>();
  for (runtime::NDArray& a : inputs_) args->ptrs.push_back(a.data());
  for (runtime::NDArray& a : outputs) args->ptrs.push_back(a.data());
  args->packed = k.pack_prepacked(&args->ptrs);
  return args;
}

std::function<void()> CandidateMeasurer::runner(
    std::shared_ptr<const compiler::BuiltKernel> kernel) {
  prepare();
  std::shared_ptr<const KernelArgs> args = args_for(*kernel, outputs_);
  return [this, kernel, args] { run(*kernel, args.get()); };
}

void CandidateMeasurer::run(const compiler::BuiltKernel& k, const KernelArgs* args) {
  k.run(args != nullptr ? args->ptrs : ptrs_, size_values_);
}

void run_jobs(size_t n, size_t threads, const std::function<void(size_t)>& job) {
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t j = next++; j < n; j = next++) job(j);
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < std::min(threads, n); ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
}

void CandidateMeasurer::build_all(const std::vector<schedule::KernelSchedule>& schedules,
                                  std::vector<CandidateResult>* results,
                                  std::vector<std::shared_ptr<const compiler::BuiltKernel>>* built,
                                  MeasureObserver* observer) {
  const size_t n = schedules.size();
  built->assign(n, nullptr);
  // Job 0 builds the reference (when not built yet); job c + 1 builds candidate c. Candidates
  // whose stages are the reference's take the reference kernel afterwards instead.
  std::string reference_error;
  const std::string reference_text = task_.default_schedule().stages_text();
  auto job = [&](size_t j) {
    if (j == 0) {
      try {
        build_reference();
      } catch (const std::exception& e) {
        reference_error = e.what();
      }
      return;
    }
    const size_t c = j - 1;
    CandidateResult& res = (*results)[c];
    if (schedules[c].stages_text() == reference_text) return;
    const auto t0 = std::chrono::steady_clock::now();
    try {
      if (observer) observer->build_started(c);
      (*built)[c] = std::make_shared<const compiler::BuiltKernel>(
          task_.build(schedules[c], task_.name + "_c" + std::to_string(num_measured_ + c)));
      res.build_ms = ms_since(t0);
    } catch (const std::exception& e) {
      res.error = std::string("build failed: ") + e.what();
    }
    if (observer) observer->built(c, res);
  };
  // Builds run on as many threads as the kernels will; nothing is timed meanwhile.
  const size_t threads = static_cast<size_t>(
      std::max(1, config_.build_threads > 0 ? config_.build_threads : runtime::get_num_threads()));
  run_jobs(n + 1, threads, job);
  if (!reference_error.empty()) throw Error("reference kernel failed: " + reference_error);
}

bool CandidateMeasurer::verify(const schedule::KernelSchedule& schedule,
                               std::shared_ptr<const compiler::BuiltKernel> kernel,
                               CandidateResult* res, MeasureObserver* observer, size_t candidate) {
  ++num_measured_;
  util::bump(util::Counter::kCandidates);
  if (kernel == nullptr) {
    if (!res->error.empty()) return false;  // the build failed
    TESSERA_CHECK(schedule.stages_text() == reference_schedule_) << "candidate was not built";
    kernel = reference_;  // built already: a kernel is JIT-compiled once
  }
  for (auto& a : outputs_) fill_sentinel(a);  // an element the kernel forgets shows up
  try {
    res->args = kernel == reference_ ? reference_args_ : args_for(*kernel, outputs_);
    if (observer) observer->run_started(candidate);
    auto r0 = std::chrono::steady_clock::now();
    run(*kernel, res->args.get());
    res->median_ms = ms_since(r0);
    res->repeats = 1;
  } catch (const std::exception& e) {
    res->error = std::string("run failed: ") + e.what();
    return false;
  }
  for (size_t i = 0; i < outputs_.size(); ++i) {
    runtime::CompareResult c = compare(outputs_[i], expected_[i], config_.rtol, atol_[i]);
    if (!c.ok) {
      res->error = "output " + task_.plan.outputs[i]->name +
                   " differs from the default schedule's: " + c.message;
      return false;
    }
  }
  res->ok = true;
  res->kernel = std::move(kernel);
  return true;
}

bool CandidateMeasurer::build_and_verify(const std::vector<schedule::KernelSchedule>& schedules,
                                         std::vector<CandidateResult>* results,
                                         MeasureObserver* observer) {
  results->assign(schedules.size(), CandidateResult());
  std::vector<std::shared_ptr<const compiler::BuiltKernel>> built;
  try {
    build_all(schedules, results, &built, observer);
    prepare();
  } catch (const std::exception& e) {
    for (CandidateResult& r : *results) {
      r.error = std::string(e.what()).rfind("reference", 0) == 0
                    ? e.what()
                    : std::string("reference kernel failed: ") + e.what();
    }
    return false;
  }
  for (size_t c = 0; c < schedules.size(); ++c) {
    verify(schedules[c], built[c], &(*results)[c], observer, c);
    if (observer) observer->verified(c, (*results)[c]);
  }
  return true;
}

CandidateResult CandidateMeasurer::measure(const schedule::KernelSchedule& schedule) {
  std::vector<CandidateResult> results;
  build_and_verify({schedule}, &results);
  CandidateResult res = std::move(results.front());
  if (!res.ok) return res;
  runtime::MeasureOptions timing = config_.timing;
  timing.warmup = std::max(0, timing.warmup - 1);  // the verification run warmed up already
  const compiler::BuiltKernel& k = *res.kernel;
  runtime::MeasureResult m = runtime::measure([&] { run(k, res.args.get()); }, timing);
  if (!m.ok) {
    res.ok = false;
    res.error = m.error;
    res.kernel.reset();
    res.args.reset();
    return res;
  }
  res.median_ms = m.median_ms;
  res.repeats = m.repeats + 1;
  return res;
}

MeasureConfig final_race_config(const MeasureConfig& search) {
  MeasureConfig race = search;
  race.rounds = kFinalRaceRounds;
  race.round_ms = search.round_ms * kFinalRaceRoundFactor;
  race.timing_budget_ms = search.timing_budget_ms * kFinalRaceRoundFactor;
  race.finalists = 0;  // every candidate is a finalist
  return race;
}

std::vector<CandidateResult> CandidateMeasurer::measure_all(
    const std::vector<schedule::KernelSchedule>& schedules, MeasureObserver* observer,
    const MeasureConfig* timing) {
  const size_t n = schedules.size();
  std::vector<CandidateResult> res;
  build_and_verify(schedules, &res, observer);
  if (observer) observer->timing_started();
  double fastest = 0;
  for (size_t c = 0; c < n; ++c) {
    if (res[c].ok && (fastest == 0 || res[c].median_ms < fastest)) fastest = res[c].median_ms;
  }
  auto fail = [&](size_t c, const std::string& why) {
    res[c].ok = false;
    res[c].error = "run failed: " + why;
    res[c].kernel.reset();
    res[c].args.reset();
  };
  for (size_t c = 0; c < n; ++c) {
    if (!res[c].ok) continue;
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
      run(*res[c].kernel, res[c].args.get());
      res[c].median_ms = std::min(res[c].median_ms, ms_since(r0));
      ++res[c].repeats;
    } catch (const std::exception& e) {
      fail(c, e.what());
      continue;
    }
    if (slow()) res[c].abandoned = true;  // keeps its best single run as its time
  }
  // The survivors are timed against the first of them (the model's favourite), by the one noise
  // rule (runtime/paired_timing.h). The reference races with the finalists in every round.
  std::vector<size_t> timed;
  for (size_t c = 0; c < n; ++c) {
    if (res[c].ok && !res[c].abandoned) timed.push_back(c);
  }
  if (timed.empty()) return res;
  const size_t ref = timed.front();
  std::vector<std::function<void()>> fns;
  for (size_t i = 1; i < timed.size(); ++i) {
    const compiler::BuiltKernel* k = res[timed[i]].kernel.get();
    const KernelArgs* args = res[timed[i]].args.get();
    fns.push_back([this, k, args] { run(*k, args); });
  }
  const compiler::BuiltKernel* ref_kernel = res[ref].kernel.get();
  const KernelArgs* ref_args = res[ref].args.get();
  const MeasureConfig& timing_config = timing != nullptr ? *timing : config_;
  runtime::PairedTimingOptions opt;
  opt.rounds = timing_config.rounds;
  opt.round_ms = timing_config.round_ms;
  opt.budget_ms = timing_config.timing_budget_ms;
  opt.finalists = std::max(0, timing_config.finalists - 1);
  opt.final_rounds = timing_config.final_rounds;
  opt.final_budget_ms = timing_config.final_budget_ms;
  if (timing_config.finalists <= 0) opt.finalists = 0;
  const runtime::PairedTiming t =
      runtime::time_paired([&] { run(*ref_kernel, ref_args); }, fns, opt);
  if (!t.reference_ok) {
    fail(ref, t.reference_error);
    return res;
  }
  res[ref].median_ms = t.reference_ms;
  res[ref].rounds = t.reference_rounds;
  res[ref].repeats += t.reference_calls;
  for (size_t i = 1; i < timed.size(); ++i) {
    const size_t c = timed[i];
    if (!t.ok[i - 1]) {
      fail(c, t.error[i - 1]);
      continue;
    }
    res[c].median_ms = t.median_ms[i - 1];
    res[c].rounds = t.rounds[i - 1];
    res[c].repeats += t.calls[i - 1];
  }
  return res;
}

}  // namespace tessera::tune
