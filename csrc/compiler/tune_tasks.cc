#include "compiler/tune_tasks.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <optional>

#include "db/workload_key.h"
#include "schedule/tuning_policy.h"
#include "tune/reuse/bridge_task.h"
#include "tune/reuse/reuse_condition.h"
#include "tune/reuse/reuse_tuner.h"
#include "tune/reuse/selector.h"
#include "tune/reuse/stored_sources.h"
#include "tune/reuse/top_k_tuner.h"
#include "tune/search/space.h"
#include "util/check.h"
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

// Live tasks for the bridges `sel` uses, each rebuilt from the two operators it joins (empty
// when some bridge cannot be built: the caller selects without bridges then). A bridge's
// extents alone do not tell its operators: two kinds (say, 3x3 convolutions of stride 1 and 2)
// can have bridges of equal extents.
std::optional<std::vector<tune::Task>> bridge_tasks(const tune::reuse::ReuseSelection& sel,
                                                    const std::vector<const tune::Task*>& tasks) {
  std::vector<tune::Task> out;
  for (const tune::reuse::TuningStep& st : sel.steps) {
    if (!st.bridge) continue;
    TESSERA_CHECK(st.joins.size() == 2) << "reuse: bridge " << st.name << " joins no operators";
    std::optional<tune::Task> built =
        tune::reuse::bridge_task(*tasks.at(st.joins[0]), *tasks.at(st.joins[1]), st.name);
    if (!built) return std::nullopt;
    out.push_back(std::move(*built));
  }
  return out;
}

// The reuse selection over the live tasks (req.reuse_selection; a selection with bridges falls
// back to the min arborescence without them when a bridge cannot be built). Bridges join `live` as
// tasks of their own (outcomes marked `bridge`, after the model's tasks), weighted by the tasks
// that reuse through them so the scheduler tunes them. Returns, per live task, the outcome index of
// the task whose choice it reuses, or -1 where the selection gives it a full search. Tasks
// without an anchor loop nest (describe_operator throws) are searched.
std::vector<int> plan_reuse(std::vector<Live>& live, int full_search_trials,
                            const TuneTasksRequest& req, TuneTasksResult* out) {
  std::vector<tune::reuse::ReuseOperator> ops;
  std::vector<const tune::Task*> tasks;
  std::vector<size_t> live_of;  // operator -> live index
  for (size_t i = 0; i < live.size(); ++i) {
    try {
      ops.push_back(tune::reuse::describe_operator(live[i].task));
      tasks.push_back(&live[i].task);
      live_of.push_back(i);
    } catch (const std::exception&) {
    }
  }
  std::vector<int> source(live.size(), -1);
  if (ops.size() < 2) return source;
  tune::reuse::TrialEstimateParams params;
  params.full_search_trials = full_search_trials;
  tune::reuse::ReuseSelection sel = tune::reuse::select_reuse(ops, req.reuse_selection, params);
  std::optional<std::vector<tune::Task>> bridges = bridge_tasks(sel, tasks);
  if (!bridges) {
    sel = tune::reuse::select_reuse(ops, tune::reuse::SelectionMethod::kArborescence, params);
    bridges.emplace();
  }
  // Outcome index of every step: the model's tasks', then one new outcome per bridge.
  std::vector<int> outcome_of_step(sel.steps.size(), -1);
  for (size_t k = 0; k < ops.size(); ++k) {
    outcome_of_step[sel.step_of_operator[k]] = live[live_of[k]].outcome;
  }
  size_t next_bridge = 0;
  for (size_t s = 0; s < sel.steps.size(); ++s) {
    if (!sel.steps[s].bridge) continue;
    TaskOutcome o;
    o.name = sel.steps[s].name;
    o.weight = 0;
    o.bridge = true;
    o.status = "search";
    o.report.name = o.name;
    tune::Task t = std::move((*bridges)[next_bridge++]);
    t.parallel = runs_in_parallel(t.plan, req.threads);
    o.report.parallel = t.parallel;
    outcome_of_step[s] = static_cast<int>(out->tasks.size());
    live.push_back(Live{outcome_of_step[s], std::move(t), std::nullopt, nullptr});
    source.push_back(-1);
    out->tasks.push_back(std::move(o));
  }
  std::vector<int> step_of_outcome(out->tasks.size(), -1);
  for (size_t s = 0; s < sel.steps.size(); ++s)
    step_of_outcome[outcome_of_step[s]] = static_cast<int>(s);
  for (size_t i = 0; i < live.size(); ++i) {
    const int step = step_of_outcome[live[i].outcome];
    if (step < 0 || sel.steps[step].source < 0) continue;
    source[i] = outcome_of_step[sel.steps[step].source];
  }
  // A bridge weighs what the model's tasks reusing through it weigh.
  for (const Live& l : live) {
    const double w = out->tasks[l.outcome].weight;
    if (out->tasks[l.outcome].bridge) continue;
    for (int s = step_of_outcome[l.outcome]; s >= 0; s = sel.steps[s].source) {
      TaskOutcome& o = out->tasks[outcome_of_step[s]];
      if (o.bridge) o.weight += w;
    }
  }
  return source;
}

// The best `k` distinct programs a search measured (its choice first, then by time): what TopK
// hands on.
std::vector<schedule::KernelSchedule> best_programs(const TaskOutcome& searched, int k) {
  std::vector<const CandidateReport*> ok;
  for (const CandidateReport& c : searched.report.candidates) {
    if (c.ok && c.median_ms > 0) ok.push_back(&c);
  }
  std::stable_sort(ok.begin(), ok.end(), [](const CandidateReport* a, const CandidateReport* b) {
    return a->median_ms < b->median_ms;
  });
  std::vector<schedule::KernelSchedule> out = {searched.schedule};
  std::vector<std::string> keys = {tune::search::schedule_key(searched.schedule)};
  for (const CandidateReport* c : ok) {
    if (static_cast<int>(out.size()) >= k) break;
    const std::string key = tune::search::schedule_key(c->schedule);
    if (std::find(keys.begin(), keys.end(), key) != keys.end()) continue;
    keys.push_back(key);
    out.push_back(c->schedule);
  }
  return out;
}

// Tunes `l` from `schedule`, the choice for `source_task` (named `source_name`; `source` is its
// outcome index, -1 for a program from the records database): by the reuse tuner, or under
// TopK by trying the source's best programs. On success the outcome says "reuse" and the choice
// is stored; on failure it is left as it was and the reason is returned.
std::optional<std::string> reuse_into(const Live& l, const tune::Task& source_task,
                                      const schedule::KernelSchedule& schedule,
                                      const std::string& source_name, int source,
                                      const TuneTasksRequest& req, TuneTasksResult* out) {
  TaskOutcome& o = out->tasks[l.outcome];
  const bool top_k = req.reuse_selection == tune::reuse::SelectionMethod::kTopK && source >= 0;
  const std::string tuner = top_k ? "topk" : "reuse";
  tune::reuse::ReuseTuneResult r;
  try {
    r = top_k
            ? tune::reuse::top_k_tune(l.task, source_task,
                                      best_programs(out->tasks[source], tune::reuse::kTopKPrograms))
            : tune::reuse::reuse_tune(l.task, source_task, schedule,
                                      tune::reuse::ReuseTunerOptions{});
  } catch (const std::exception& e) {
    return tuner + " from " + source_name + " failed: " + e.what();
  }
  o.status = "reuse";
  o.reused_from = source;
  o.reused_from_name = source_name;
  o.schedule = r.best;
  o.schedule.tuner = tuner;
  o.report.schedule = o.schedule;
  o.report.source = tuner;
  o.report.tuner = tuner;
  o.report.trials = r.trials;
  o.report.median_ms = r.best_ms;
  out->reuse_trials += r.trials;
  util::bump(util::Counter::kTuneRuns);
  if (l.key) {
    req.records->put(db::make_record(
        *l.key, o.schedule.dump(), tuner,
        r.best_ms > 0 ? std::optional<double>(r.best_ms) : std::nullopt, std::nullopt, r.trials));
  }
  return std::nullopt;
}

// Tunes `l` from the choice of task `source` (outcome index); on failure the task keeps the
// rules' schedule (status "skipped") with the reason in its report's note.
void tune_by_reuse(const Live& l, int source, const tune::Task& source_task,
                   const TuneTasksRequest& req, TuneTasksResult* out) {
  const std::optional<std::string> failed = reuse_into(l, source_task, out->tasks[source].schedule,
                                                       out->tasks[source].name, source, req, out);
  if (failed) {
    out->tasks[l.outcome].status = "skipped";
    out->tasks[l.outcome].report.note = *failed;
  }
}

// ETO across models and processes: live tasks that can reuse a program tuned earlier (the
// records database's) are tuned from the nearest one and leave `live`; a failed reuse leaves
// the task to be searched.
void reuse_stored(std::vector<Live>& live, const TuneTasksRequest& req, TuneTasksResult* out) {
  const std::vector<tune::reuse::StoredSource> sources =
      tune::reuse::stored_sources(*req.records, db::host_target());
  if (sources.empty()) return;
  std::vector<Live> rest;
  for (Live& l : live) {
    const tune::reuse::StoredSource* src = nullptr;
    try {
      src = tune::reuse::nearest_source(tune::reuse::describe_operator(l.task), sources);
    } catch (const std::exception&) {  // no anchor loop nest: searched
    }
    if (src == nullptr || reuse_into(l, src->task, src->schedule, src->name, -1, req, out)) {
      rest.push_back(std::move(l));
    }
  }
  live = std::move(rest);
}

// Runs tune_by_reuse on every reused task once its source is tuned (a source may be reused
// itself: the selection is a tree, so each pass makes progress).
void tune_reused(std::vector<Live>& reused, const std::vector<int>& source,
                 const std::map<int, const tune::Task*>& task_of, const TuneTasksRequest& req,
                 TuneTasksResult* out) {
  std::vector<bool> done_outcome(out->tasks.size(), true);
  for (const Live& l : reused) done_outcome[l.outcome] = false;
  for (size_t left = reused.size(); left > 0;) {
    const size_t before = left;
    for (size_t i = 0; i < reused.size(); ++i) {
      if (done_outcome[reused[i].outcome] || !done_outcome[source[i]]) continue;
      tune_by_reuse(reused[i], source[i], *task_of.at(source[i]), req, out);
      done_outcome[reused[i].outcome] = true;
      --left;
    }
    TESSERA_CHECK(left < before) << "reuse selection has a cycle";
  }
}

// Search mode over `live` under the task scheduler, `total` measurements in all; every choice
// goes to the outcome and to the records database.
void search_under_scheduler(std::vector<Live>& live, int total, const TuneTasksRequest& req,
                            TuneTasksResult* out) {
  out->round_trials = scheduler_round_trials(total, static_cast<int>(live.size()));
  std::vector<tune::search::SchedulerTask> sched_tasks;
  for (Live& l : live) {
    TaskOutcome& o = out->tasks[l.outcome];
    SearchSettings s;
    s.name = o.name;
    s.trials = total;  // the scheduler's rounds are the budget
    s.per_round = out->round_trials;
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
  so.rounds = std::max(1, total / out->round_trials);
  so.seed = req.seed;
  int measured = 0;
  const tune::search::SchedulerResult sr =
      tune::search::schedule_tasks(sched_tasks, so, [&](int i) {
        measured += live[i].session->round();
        out->trials_after.push_back(measured);
        return live[i].session->best_ms();
      });
  out->objective = sr.objective;
  for (int i : sr.order) out->order.push_back(live[i].outcome);

  for (size_t i = 0; i < live.size(); ++i) {
    Live& l = live[i];
    TaskOutcome& o = out->tasks[l.outcome];
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
}

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
  std::vector<tune::Task> tasks;
  double graph_reduce_points = 0;
  for (const TaskSpec& spec : specs) {
    tasks.push_back(tune::Task::create(spec.outputs, spec.inputs, spec.name));
    graph_reduce_points += schedule::reduce_points(tasks.back().plan, tune::kSymbolicSizeGuess);
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    const TaskSpec& spec = specs[i];
    TaskOutcome o;
    o.name = spec.name;
    o.weight = spec.weight;
    tune::Task task = std::move(tasks[i]);
    task.parallel = runs_in_parallel(task.plan, req.threads);
    task.constant_inputs = input_names(spec.inputs, spec.constant_inputs);
    std::optional<db::WorkloadKey> key;
    if (req.records != nullptr) key = db::make_workload_key(spec.outputs, spec.inputs);
    std::optional<db::Record> rec = key ? req.records->best(*key) : std::nullopt;
    if (!worth_tuning(task.plan, req.scope, graph_reduce_points)) {
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
  std::vector<Live> reused;        // tuned after the search, from their source's choice
  std::vector<int> reused_source;  // the outcome index of each one's source
  if (req.reuse && req.records != nullptr) reuse_stored(live, req, &out);
  if (req.reuse) {
    const std::vector<int> source = plan_reuse(live, per_task, req, &out);
    std::vector<Live> searched;
    for (size_t i = 0; i < live.size(); ++i) {
      if (source[i] < 0) {
        searched.push_back(std::move(live[i]));
      } else {
        reused.push_back(std::move(live[i]));
        reused_source.push_back(source[i]);
      }
    }
    live = std::move(searched);
  }
  const int total = req.trials > 0 ? req.trials : per_task * static_cast<int>(live.size());
  if (!live.empty()) search_under_scheduler(live, total, req, &out);
  if (!reused.empty()) {
    std::map<int, const tune::Task*> task_of;
    for (const Live& l : live) task_of[l.outcome] = &l.task;
    for (const Live& l : reused) task_of[l.outcome] = &l.task;
    tune_reused(reused, reused_source, task_of, req, &out);
  }
  out.tune_s = seconds_since(t0);
  util::add_tune_seconds(out.tune_s);
  return out;
}

}  // namespace tessera::compiler
