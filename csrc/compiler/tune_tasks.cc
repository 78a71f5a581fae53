#include "compiler/tune_tasks.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <optional>

#include "db/workload_key.h"
#include "schedule/tuning_policy.h"
#include "util/counters.h"

namespace tessera::compiler {

namespace {

// Rounds a task gets on average at the least, so the gradient has a history to work with
// (a warm-up round plus two).
constexpr int kMinRoundsPerTask = 3;
// Smallest scheduler round: below it a round's paired timing is dominated by its reference.
constexpr int kMinRoundTrials = 8;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// A task the scheduler tunes.
struct Live {
  int outcome = 0;  // index into the result's tasks
  tune::Task task;
  std::optional<db::WorkloadKey> key;
  std::unique_ptr<SearchSession> session;
};

}  // namespace

int scheduler_round_trials(int total, int tasks) {
  const int ansor_batch = schedule::tuning_policy().search_per_round;
  if (tasks <= 0) return ansor_batch;
  return std::clamp(total / (kMinRoundsPerTask * tasks), kMinRoundTrials, ansor_batch);
}

TuneTasksResult tune_tasks(const std::vector<TaskSpec>& specs, const TuneTasksRequest& req) {
  const auto t0 = std::chrono::steady_clock::now();
  const schedule::TuningPolicy& policy = schedule::tuning_policy();
  TuneTasksResult out;
  std::vector<Live> live;
  for (const TaskSpec& spec : specs) {
    TaskOutcome o;
    o.name = spec.name;
    o.weight = spec.weight;
    tune::Task task = tune::Task::create(spec.outputs, spec.inputs, spec.name);
    task.parallel = runs_in_parallel(task.plan, req.threads);
    std::optional<db::WorkloadKey> key;
    if (req.records != nullptr) key = db::make_workload_key(spec.outputs, spec.inputs);
    std::optional<db::Record> rec = key ? req.records->best(*key) : std::nullopt;
    if (!worth_tuning(task.plan)) {
      o.status = "skipped";
    } else if (rec) {
      o.status = "records";
      o.schedule = schedule::KernelSchedule::parse(rec->schedule_json);
    } else {
      o.status = "search";
      o.report.name = spec.name;
      o.report.parallel = task.parallel;
      if (key) o.report.workload = key->hash_hex();
      live.push_back(Live{static_cast<int>(out.tasks.size()), std::move(task), key, nullptr});
    }
    out.tasks.push_back(std::move(o));
  }
  if (live.empty()) return out;

  const int per_task = req.trials_per_task > 0 ? req.trials_per_task : policy.search_trials;
  const int total = req.trials > 0 ? req.trials : per_task * static_cast<int>(live.size());
  out.round_trials = scheduler_round_trials(total, static_cast<int>(live.size()));
  std::vector<tune::search::SchedulerTask> sched_tasks;
  for (Live& l : live) {
    TaskOutcome& o = out.tasks[l.outcome];
    SearchSettings s;
    s.name = o.name;
    s.trials = total;  // the scheduler's rounds are the budget
    s.per_round = out.round_trials;
    s.seed = req.seed;
    s.fresh_model = req.fresh_model;
    s.runner = req.runner;
    s.on_trial = req.on_trial;
    s.log = req.records;  // measurements logged, a killed search resumed
    s.key = l.key;
    l.session = std::make_unique<SearchSession>(l.task, std::move(s), &o.report);
    tune::search::SchedulerTask st;
    st.name = o.name;
    st.weight = o.weight;
    st.flops = l.task.flops();
    sched_tasks.push_back(st);
  }
  tune::search::SchedulerOptions so;
  so.strategy = req.strategy;
  so.rounds = std::max(1, total / out.round_trials);
  so.seed = req.seed;
  int measured = 0;
  const tune::search::SchedulerResult sr =
      tune::search::schedule_tasks(sched_tasks, so, [&](int i) {
        measured += live[i].session->round();
        out.trials_after.push_back(measured);
        return live[i].session->best_ms();
      });
  out.objective = sr.objective;
  for (int i : sr.order) out.order.push_back(live[i].outcome);

  for (size_t i = 0; i < live.size(); ++i) {
    Live& l = live[i];
    TaskOutcome& o = out.tasks[l.outcome];
    o.rounds = sr.rounds_per_task[i];
    Tuned t = l.session->finish();
    o.schedule = t.schedule;
    o.report.schedule = t.schedule;
    o.report.source = t.schedule.tuner == "default" ? "rules" : t.schedule.tuner;
    util::bump(util::Counter::kTuneRuns);
    if (l.key) {
      req.records->put(db::make_record(
          *l.key, t.schedule.dump(), t.schedule.tuner,
          o.report.median_ms > 0 ? std::optional<double>(o.report.median_ms) : std::nullopt,
          std::nullopt, o.report.trials));
    }
  }
  out.tune_s = seconds_since(t0);
  util::add_tune_seconds(out.tune_s);
  return out;
}

}  // namespace tessera::compiler
