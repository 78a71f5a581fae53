#include "layout/layout_tuner.h"

#include <algorithm>
#include <set>

#include "db/record.h"
#include "db/workload_key.h"
#include "ir/tensor.h"
#include "layout/propagate.h"
#include "tune/common.h"
#include "tune/gensor/construct.h"
#include "util/check.h"

namespace tessera::layout {

namespace {

// One short loop tuning of one relaid DAG.
struct LoopRun {
  schedule::KernelSchedule schedule;
  double best_ms = -1;  // best verified candidate (-1: none; `schedule` is the rules')
  std::shared_ptr<const compiler::BuiltKernel> kernel;  // `schedule` as measured (null: none)
  int measured = 0;
  std::set<std::string> measured_texts;  // stages_text of every measured candidate
};

void keep_if_better(const schedule::KernelSchedule& s, const tune::CandidateResult& r,
                    LoopRun* run) {
  ++run->measured;
  run->measured_texts.insert(s.stages_text());
  if (r.ok && (run->best_ms < 0 || r.median_ms < run->best_ms)) {
    run->best_ms = r.median_ms;
    run->schedule = s;
    run->kernel = r.kernel;
  }
}

Relaid relaid_dag(const std::vector<ir::Tensor>& outputs, const std::vector<ir::Tensor>& inputs,
                  const LayoutCandidate& c) {
  return apply_layouts(outputs, inputs, propagate_layouts(outputs, c.layouts));
}

tune::Task task_for(const Relaid& r, const LayoutTuneOptions& o) {
  tune::Task t = tune::Task::create(r.outputs, r.inputs, "layout");
  t.constant_inputs = o.constant_inputs;
  return t;
}

// Construct mode measuring about `measurements` candidates, the rules' schedule among them.
LoopRun tune_loops(const tune::Task& task, int measurements, uint64_t seed) {
  tune::gensor::ConstructOptions opts = tune::gensor::policy_construct_options(seed);
  opts.include_default = true;
  opts.top_k = std::max(1, measurements - 1);
  const tune::gensor::ConstructResult r = tune::gensor::construct(task, opts);
  LoopRun run;
  run.schedule = task.default_schedule();
  for (const tune::gensor::ConstructCandidate& c : r.candidates) {
    if (c.measured) keep_if_better(c.schedule, c.result, &run);
  }
  return run;
}

// The loop stage: the next `rest` candidates of the same ranking (construct mode with the
// layout stage's seed, predicted only) that the layout stage did not measure, measured in one
// batch. Continuing the ranking, rather than drawing a new one, keeps a layout whose loops the
// layout stage already explored from spending the rest on candidates it ranked lower.
void continue_loops(const tune::Task& task, int rest, uint64_t seed, LoopRun* run) {
  tune::gensor::ConstructOptions opts = tune::gensor::policy_construct_options(seed);
  opts.predict_only = true;
  opts.include_default = false;
  opts.top_k = rest + run->measured;
  std::vector<schedule::KernelSchedule> fresh;
  for (const tune::gensor::ConstructCandidate& c : tune::gensor::construct(task, opts).candidates) {
    if (static_cast<int>(fresh.size()) < rest &&
        !run->measured_texts.count(c.schedule.stages_text())) {
      fresh.push_back(c.schedule);
    }
  }
  if (fresh.empty()) return;
  tune::CandidateMeasurer measurer(task, opts.measure);
  const std::vector<tune::CandidateResult> results = measurer.measure_all(fresh);
  for (size_t i = 0; i < fresh.size(); ++i) keep_if_better(fresh[i], results[i], run);
}

// Where ALT's choices are stored: the workload with its boundary layouts free, on this target.
db::WorkloadKey layouts_key(const std::vector<ir::Tensor>& outputs,
                            const std::vector<ir::Tensor>& inputs) {
  return db::make_workload_key(outputs, inputs, db::host_target() + ":layouts");
}

// The result's kernel: `schedule` over the relaid DAG (weights prepacked where it packs), the
// measured kernel when there is one (no second JIT), and the schedule as stored: the chosen
// layouts (propagated ones included) and the tuner.
void finish(const std::vector<ir::Tensor>& outputs, const Relaid& relaid,
            const schedule::KernelSchedule& schedule,
            std::shared_ptr<const compiler::BuiltKernel> measured, double best_ms,
            const LayoutTuneOptions& o, LayoutTuneResult* res) {
  compiler::CompileRequest req;
  req.name = "layout";
  req.schedule = schedule;
  req.built = std::move(measured);
  for (size_t i = 0; i < relaid.inputs.size(); ++i) {
    const std::string& name = relaid.inputs[i]->name;
    if (std::find(o.constant_inputs.begin(), o.constant_inputs.end(), name) !=
        o.constant_inputs.end()) {
      req.constant_inputs.push_back(static_cast<int>(i));
    }
  }
  res->relaid = relaid;
  res->kernel = compiler::compile(relaid.outputs, relaid.inputs, req);
  res->best_ms = best_ms;
  res->schedule = res->kernel.kernel->schedule();
  res->schedule.tuner = "alt:" + res->chosen.name;
  res->schedule.layouts.clear();
  for (const auto& [name, layout] : propagate_layouts(outputs, res->chosen.layouts)) {
    res->schedule.layouts[name] = layout.to_string();
  }
}

// The stored choice for this DAG, built without measuring; nullopt when there is none (or it no
// longer applies: then tuning runs again).
std::optional<LayoutTuneResult> replay(const std::vector<ir::Tensor>& outputs,
                                       const std::vector<ir::Tensor>& inputs,
                                       const LayoutTuneOptions& o) {
  if (o.records == nullptr) return std::nullopt;
  std::optional<db::Record> rec = o.records->best(layouts_key(outputs, inputs));
  if (!rec) return std::nullopt;
  try {
    const schedule::KernelSchedule s = schedule::KernelSchedule::parse(rec->schedule_json);
    LayoutTuneResult res;
    res.chosen = {s.tuner.rfind("alt:", 0) == 0 ? s.tuner.substr(4) : s.tuner,
                  parse_layouts(outputs, inputs, s.layouts)};
    res.from_records = true;
    finish(outputs, apply_layouts(outputs, inputs, res.chosen.layouts), s, nullptr,
           rec->median_ms.value_or(-1), o, &res);
    return res;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

void store(const std::vector<ir::Tensor>& outputs, const std::vector<ir::Tensor>& inputs,
           const LayoutTuneOptions& o, const LayoutTuneResult& res) {
  if (o.records == nullptr) return;
  const std::optional<double> ms =
      res.best_ms > 0 ? std::optional<double>(res.best_ms) : std::nullopt;
  o.records->put(db::make_record(layouts_key(outputs, inputs), res.schedule.dump(), "alt", ms,
                                 std::nullopt,
                                 res.layout_stage_measured + res.loop_stage_measured));
}

}  // namespace

LayoutTuneResult tune_layouts(const std::vector<ir::Tensor>& outputs,
                              const std::vector<ir::Tensor>& inputs,
                              const std::vector<LayoutCandidate>& candidates,
                              const LayoutTuneOptions& options) {
  if (std::optional<LayoutTuneResult> stored = replay(outputs, inputs, options)) return *stored;
  LayoutTuneResult res;
  int best = -1;
  Relaid best_dag;
  LoopRun best_run;
  std::optional<tune::Task> best_task;
  for (const LayoutCandidate& c : candidates) {
    LayoutTrial trial{c, -1, 0, ""};
    try {
      Relaid dag = relaid_dag(outputs, inputs, c);
      tune::Task task = task_for(dag, options);
      const LoopRun run = tune_loops(task, options.per_layout, options.seed);
      trial.best_ms = run.best_ms;
      trial.measured = run.measured;
      if (run.best_ms > 0 && (best < 0 || run.best_ms < best_run.best_ms)) {
        best = static_cast<int>(res.trials.size());
        best_dag = dag;
        best_run = run;
        best_task = task;
      }
    } catch (const std::exception& e) {
      trial.error = e.what();
    }
    res.layout_stage_measured += trial.measured;
    res.trials.push_back(trial);
  }
  TESSERA_CHECK(best >= 0) << "layout tuning: no candidate layout could be tuned";
  res.chosen = res.trials[static_cast<size_t>(best)].candidate;
  const int rest = options.budget - res.layout_stage_measured;
  if (rest > 0) {
    const int before = best_run.measured;
    continue_loops(*best_task, rest, options.seed, &best_run);
    res.loop_stage_measured = best_run.measured - before;
  }
  finish(outputs, best_dag, best_run.schedule, best_run.kernel, best_run.best_ms, options, &res);
  store(outputs, inputs, options, res);
  return res;
}

LayoutTuneResult tune_loops_only(const std::vector<ir::Tensor>& outputs,
                                 const std::vector<ir::Tensor>& inputs,
                                 const LayoutCandidate& candidate,
                                 const LayoutTuneOptions& options) {
  LayoutTuneResult res;
  res.chosen = candidate;
  const Relaid dag = relaid_dag(outputs, inputs, candidate);
  const LoopRun run = tune_loops(task_for(dag, options), options.budget, options.seed);
  res.loop_stage_measured = run.measured;
  finish(outputs, dag, run.schedule, run.kernel, run.best_ms, options, &res);
  return res;
}

}  // namespace tessera::layout
