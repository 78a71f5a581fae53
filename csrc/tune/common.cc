#include "tune/common.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "compiler/build.h"
#include "ir/eval.h"
#include "util/check.h"

namespace tessera::tune {

namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

int64_t extent_value(const ir::Expr& e, const ir::EvalEnv& env) { return ir::evaluate(e, env).i; }

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
      p *= iv.extent->is_const_int() ? static_cast<double>(iv.extent->int_value) : kSymbolicSizeGuess;
    }
    for (const ir::IterVar& iv : s.op->op->reduce_axes) {
      p *= iv.extent->is_const_int() ? static_cast<double>(iv.extent->int_value) : kSymbolicSizeGuess;
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
    inputs_.push_back(runtime::NDArray::random(task_.inputs[i]->dtype, shape_of(task_.inputs[i]),
                                               config_.seed + i));
  }
  for (const ir::Tensor& o : task_.outputs) {
    expected_.emplace_back(o->dtype, shape_of(o));
    outputs_.emplace_back(o->dtype, shape_of(o));
  }
  std::vector<void*> ptrs;
  for (auto& a : inputs_) ptrs.push_back(a.data());
  for (auto& a : expected_) ptrs.push_back(a.data());
  ref.run(ptrs, size_values_);
  for (const runtime::NDArray& e : expected_) {
    double max_ref = 0;
    const int64_t n = e.numel();
    for (int64_t k = 0; k < n; ++k) {
      double v = std::fabs(e.get(k));
      if (std::isfinite(v)) max_ref = std::max(max_ref, v);
    }
    atol_.push_back(config_.atol_rel * (1.0 + max_ref));
  }
  reference_ms_ = ms_since(t0);
  prepared_ = true;
}

CandidateResult CandidateMeasurer::measure(const schedule::KernelSchedule& schedule,
                                           const std::string& name) {
  CandidateResult res;
  try {
    prepare();
  } catch (const std::exception& e) {
    res.error = std::string("reference kernel failed: ") + e.what();
    return res;
  }
  ++num_measured_;
  auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<compiler::BuiltKernel> kernel;
  try {
    compiler::BuildOptions opts;
    opts.name = task_.name + "_" + name;
    opts.schedule = schedule;
    opts.target = task_.target;
    kernel = std::make_unique<compiler::BuiltKernel>(
        compiler::build_cpu(task_.outputs, task_.inputs, opts));
  } catch (const std::exception& e) {
    res.error = std::string("build failed: ") + e.what();
    return res;
  }
  res.build_ms = ms_since(t0);

  std::vector<void*> ptrs;
  for (auto& a : inputs_) ptrs.push_back(a.data());
  for (auto& a : outputs_) {
    a.fill(12345.0);  // an element the kernel forgets to write shows up as a mismatch
    ptrs.push_back(a.data());
  }
  auto run = [&] { kernel->run(ptrs, size_values_); };
  double first_ms = 0;
  auto verify = [&](std::string* why) {
    for (size_t i = 0; i < outputs_.size(); ++i) {
      runtime::CompareResult c =
          runtime::allclose(outputs_[i], expected_[i], config_.rtol, atol_[i]);
      if (!c.ok) {
        *why = "output " + task_.outputs[i]->name + " differs from the default schedule's: " +
               c.message;
        return false;
      }
    }
    return true;
  };
  // Verification run (timed once: it decides whether the candidate is worth the repeats).
  try {
    auto r0 = std::chrono::steady_clock::now();
    run();
    first_ms = ms_since(r0);
  } catch (const std::exception& e) {
    res.error = std::string("run failed: ") + e.what();
    return res;
  }
  std::string why;
  if (!verify(&why)) {
    res.error = why;
    return res;
  }
  if (config_.abandon_factor > 0 && best_ms_ > 0 && first_ms > config_.abandon_factor * best_ms_) {
    res.ok = true;
    res.abandoned = true;
    res.median_ms = first_ms;
    res.repeats = 1;
    return res;
  }
  runtime::MeasureOptions timing = config_.timing;
  timing.warmup = std::max(0, timing.warmup - 1);  // the verification run warmed up already
  runtime::MeasureResult m = runtime::measure(run, timing);
  if (!m.ok) {
    res.error = m.error;
    return res;
  }
  res.ok = true;
  res.median_ms = m.median_ms;
  res.repeats = m.repeats;
  if (best_ms_ == 0 || m.median_ms < best_ms_) best_ms_ = m.median_ms;
  return res;
}

}  // namespace tessera::tune
