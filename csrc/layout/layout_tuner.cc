#include "layout/layout_tuner.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <memory>
#include <set>

#include "db/record.h"
#include "db/workload_key.h"
#include "ir/tensor.h"
#include "layout/propagate.h"
#include "runtime/paired_timing.h"
#include "schedule/tuning_policy.h"
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
  opts.measure_variants = false;  // `measurements` is the budget
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
// batch with the layout stage's best, which is timed again there (not counted as measured): the
// best is chosen within one batch, not against a time taken seconds earlier. Continuing the
// ranking, rather than drawing a new one, keeps a layout whose loops the layout stage already
// explored from spending the rest on candidates it ranked lower.
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
  fresh.insert(fresh.begin(), run->schedule);
  tune::CandidateMeasurer measurer(task, opts.measure);
  const std::vector<tune::CandidateResult> results = measurer.measure_all(fresh);
  if (results.front().ok) {  // the incumbent's time from this batch
    run->best_ms = results.front().median_ms;
    run->kernel = results.front().kernel;
  }
  for (size_t i = 1; i < fresh.size(); ++i) keep_if_better(fresh[i], results[i], run);
}

// The race: how many of the layout stage's best layouts are re-timed together, and how (longer
// rounds than a tuning batch's, every round run).
constexpr size_t kRaceLayouts = 3;
constexpr int kRaceRounds = 7;
constexpr double kRaceRoundMs = 10;

// One tuned layout of the layout stage.
struct TunedLayout {
  size_t trial;  // index in LayoutTuneResult::trials
  Relaid dag;
  tune::Task task;
  LoopRun run;
};

// Re-times the best kernels of up to kRaceLayouts layouts (by layout-stage time) in one paired
// batch, the layout stage's best as the incumbent, and returns the index in `tuned` of the
// layout to keep: a challenger replaces the incumbent only by the tuning policy's win margin.
size_t race_layouts(const std::deque<TunedLayout>& tuned, LayoutTuneResult* res) {
  std::vector<size_t> order;
  for (size_t i = 0; i < tuned.size(); ++i) {
    if (tuned[i].run.kernel) order.push_back(i);
  }
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return tuned[a].run.best_ms < tuned[b].run.best_ms; });
  if (order.size() > kRaceLayouts) order.resize(kRaceLayouts);
  if (order.size() < 2) return order.empty() ? 0 : order.front();
  std::vector<std::unique_ptr<tune::CandidateMeasurer>> measurers;
  std::vector<std::function<void()>> calls;
  for (size_t i : order) {
    measurers.push_back(std::make_unique<tune::CandidateMeasurer>(tuned[i].task));
    calls.push_back(measurers.back()->runner(tuned[i].run.kernel));
  }
  runtime::PairedTimingOptions opts;
  opts.rounds = opts.min_rounds = kRaceRounds;
  opts.round_ms = kRaceRoundMs;
  opts.budget_ms = std::numeric_limits<double>::infinity();
  const std::vector<std::function<void()>> challengers(calls.begin() + 1, calls.end());
  const runtime::PairedTiming timing = runtime::time_paired(calls.front(), challengers, opts);
  if (!timing.reference_ok) return order.front();
  const auto name_of = [&](size_t i) { return res->trials[tuned[i].trial].candidate.name; };
  res->race.push_back({name_of(order.front()), 1.0});
  for (size_t c = 0; c < challengers.size(); ++c) {
    res->race.push_back({name_of(order[c + 1]),
                         timing.ok[c] ? timing.ratio[c] : std::numeric_limits<double>::infinity()});
  }
  const int winner = runtime::paired_winner(timing, schedule::tuning_policy().win_margin);
  return winner < 0 ? order.front() : order[static_cast<size_t>(winner) + 1];
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
  std::deque<TunedLayout> tuned;  // stable addresses: the race's measurers refer to the tasks
  for (const LayoutCandidate& c : candidates) {
    LayoutTrial trial{c, -1, 0, ""};
    try {
      Relaid dag = relaid_dag(outputs, inputs, c);
      tune::Task task = task_for(dag, options);
      LoopRun run = tune_loops(task, options.per_layout, options.seed);
      trial.best_ms = run.best_ms;
      trial.measured = run.measured;
      if (run.best_ms > 0) {
        tuned.push_back({res.trials.size(), std::move(dag), std::move(task), std::move(run)});
      }
    } catch (const std::exception& e) {
      trial.error = e.what();
    }
    res.layout_stage_measured += trial.measured;
    res.trials.push_back(trial);
  }
  TESSERA_CHECK(!tuned.empty()) << "layout tuning: no candidate layout could be tuned";
  TunedLayout& best = tuned[race_layouts(tuned, &res)];
  res.chosen = res.trials[best.trial].candidate;
  LoopRun& best_run = best.run;
  const Relaid& best_dag = best.dag;
  const int rest = options.budget - res.layout_stage_measured;
  if (rest > 0) {
    const int before = best_run.measured;
    continue_loops(best.task, rest, options.seed, &best_run);
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
