#pragma once
// Search mode on one task, one round at a time: the TaskSearcher (tune/search/evolution.h), the
// runner that measures its picks, the cost model it ranks with, and the bookkeeping the compile
// report needs (every candidate, the rules' schedule's time, the best kernel so far). The compile
// call runs one session to the end; the whole-model tuner (compiler/tune_tasks.h) interleaves
// the sessions of many tasks under the task scheduler.
//
// Invariants: only the best kernel so far is kept alive (candidates' kernels are dropped after
// measurement); finish() times the best few schedules again with the rules' schedule in one
// paired batch (the final race, in tune::final_race_config's longer rounds) and returns the
// rules' schedule unless the race's best beat it by the policy's win margin there.
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "compiler/compile.h"
#include "cost/cost_model.h"
#include "db/records.h"
#include "db/workload_key.h"
#include "tune/search/evolution.h"

namespace tessera::compiler {

// The outcome of tuning: the schedule and, when a tuner measured it in this process, its verified
// kernel (null: build `schedule`).
struct Tuned {
  schedule::KernelSchedule schedule;
  std::shared_ptr<const BuiltKernel> kernel;
};

struct SearchSettings {
  std::string name = "kernel";
  int trials = 0;     // measurements in all (0: the policy's search_trials)
  int per_round = 0;  // measurements per round (0: the policy's search_per_round)
  uint64_t seed = 0;
  // Seed the first population with construct mode's predicted top-k (besides the rules'
  // schedule). False: the ablation without construct seeding.
  bool construct_seeds = true;
  bool retrain = true;  // false: the ablation that fits the learned model once
  // Ranked picks chosen for knob coverage among this many times as many (SearchOptions); 1: the
  // ablation that measures the best-ranked alone.
  int diversity_pool = tune::search::SearchOptions().diversity_pool;
  // "xgboost": the process's shared model and training set (one model across tasks, Ansor's);
  // "xgboost_no_prior": a fresh XGBoost model of its own without the analytic prior (trees
  // alone, the ablation of cost/xgb_model.h's prior); "random": random scores (the ablation's
  // baseline).
  std::string model = "xgboost";
  // An XGBoost model and training set of this session's own instead of the process's shared
  // ones (ablations and scheduler comparisons start from the same empty model).
  bool fresh_model = false;
  std::shared_ptr<tune::Runner> runner;  // null: the policy's default runner
  TrialCallback on_trial;
  // With a records database and the workload's key: every measurement is logged as it happens,
  // a search killed earlier resumes from the log (its candidates are reported, never measured
  // again; a restored winner is built by the caller), and the shared learned model is loaded at
  // the process's first search and saved after each round that refit it.
  db::RecordsDB* log = nullptr;
  std::optional<db::WorkloadKey> key;
};

// The search settings of a compile request.
SearchSettings search_settings(const CompileRequest& req);

// Forgets what the process's shared search model learned (benchmarks compare strategies from the
// same empty model). Not while a search runs.
void reset_shared_search_model();

// The runner search mode uses when a request names none.
std::shared_ptr<tune::Runner> default_search_runner();

class SearchSession {
 public:
  // `task` and `report` outlive the session; the report collects every candidate.
  SearchSession(const tune::Task& task, SearchSettings settings, CompileReport* report);
  ~SearchSession();
  SearchSession(const SearchSession&) = delete;
  SearchSession& operator=(const SearchSession&) = delete;

  // One round of the search; returns the candidates it measured (0: budget spent or nothing new).
  int round();
  bool done() const;
  // Best measured time so far (+infinity while none verified).
  double best_ms() const;
  const tune::search::SearchResult& result() const;
  // The chosen schedule and kernel (see the invariants above); fills the report's choice.
  Tuned finish();
  // The schedule finish() would choose had the search stopped after its first n measurements
  // (the same final race, over those n; benchmarks read a search's budget checkpoints so).
  schedule::KernelSchedule choice_within(size_t n);

 private:
  std::vector<tune::CandidateResult> measure(const std::vector<schedule::KernelSchedule>& batch);
  // Halves the population (down to a floor) while the search's overhead exceeds its share of
  // the wall time: cheap kernels measure fast, and evolution must not dominate their search.
  void keep_overhead_bounded();
  // Reports one measured candidate (of this session or restored) and keeps the best.
  void take(const schedule::KernelSchedule& s, const tune::CandidateResult& r);
  // Restores the logged trials of an earlier search of this workload (settings_.log).
  void resume_from_log();
  void save_model_if_refit();
  // The choice among the first n measured candidates: the fastest of the final race (the best
  // kFinalists distinct schedules timed again with the rules' in one batch), or the fastest
  // measured when no race ran or every finalist failed in it.
  struct Verdict {
    std::optional<schedule::KernelSchedule> schedule;  // none: nothing verified
    std::shared_ptr<const BuiltKernel> kernel;         // null: build the schedule
    double ms = 0;                                     // its time
    double default_ms = -1;                            // the rules' time (-1: not verified)
    int raced = 0;                                     // finalists raced (0: no race)
  };
  Verdict decide(size_t n);
  static bool rules_win(const Verdict& v);

  const tune::Task& task_;
  SearchSettings settings_;
  CompileReport* rep_;
  schedule::KernelSchedule rules_;
  std::string rules_text_;
  std::unique_ptr<tune::TaskRunner> runner_;
  std::unique_ptr<tune::search::TaskSearcher> searcher_;
  struct ModelRef;
  std::unique_ptr<ModelRef> model_;
  std::optional<schedule::KernelSchedule> best_schedule_;
  std::shared_ptr<const BuiltKernel> best_kernel_;  // null when measured in another process
  double best_ms_ = 0;
  double flops_ = 0;
  double started_s_ = 0;
  int min_model_samples_ = 0;
};

}  // namespace tessera::compiler
