#pragma once
// Search mode over a whole model: the kernels (tasks) of a model tuned together under Ansor's task
// scheduler (tune/search/task_scheduler.h), one SearchSession per task and one cost model across
// them, so measurement goes where it lowers the model's latency most.
//
//   tasks -> drop those not worth tuning and those the records database has
//         -> with reuse (ETO, tune/reuse/): the reuse pair selection (a greedy directed Steiner
//            tree over the optimization-choice graph with one-hop bridge operators, which join
//            as tasks of their own) keeps a full search only for the tasks it roots; the
//            others are tuned afterwards by the reuse tuner from their source's choice; first,
//            tasks that can reuse a program stored in the records database (another model,
//            an earlier process) are tuned from the nearest one
//         -> rounds of `round_trials` measurements, each given to one searched task by the
//            scheduler (gradient allocation after a warm-up round per task; round-robin as the
//            ablation)
//         -> each task's choice (the rules' schedule unless beaten by the win margin), stored in
//            the records database when one is given
// The compile call then finds every tuned schedule in the records (or the caller passes it).
#include <memory>
#include <string>
#include <vector>

#include "compiler/compile.h"
#include "compiler/search_session.h"
#include "tune/reuse/selector.h"
#include "tune/search/task_scheduler.h"

namespace tessera::compiler {

struct TaskSpec {
  std::vector<ir::Tensor> outputs;
  std::vector<ir::Tensor> inputs;
  std::string name = "kernel";
  double weight = 1;  // how often the kernel runs per forward pass
  // Positions of inputs whose values are fixed across calls (CompileRequest::constant_inputs).
  std::vector<int> constant_inputs;
};

struct TuneTasksRequest {
  int trials = 0;           // measurements over all tasks (0: trials_per_task per task searched)
  int trials_per_task = 0;  // when trials is 0 (0: the policy's search_trials)
  tune::search::Allocation strategy = tune::search::Allocation::kGradient;
  uint64_t seed = 0;
  db::RecordsDB* records = nullptr;  // looked up before and written after (not owned)
  Threads threads = Threads::kAuto;
  // Which tasks are searched (kAutomatic: worth_tuning, with the tasks' summation points
  // together as the graph's).
  TuneScope scope = TuneScope::kAutomatic;
  bool fresh_model = false;  // see SearchSettings::fresh_model
  std::shared_ptr<tune::Runner> runner;
  TrialCallback on_trial;
  // ETO: tasks whose loop nests another task's dominates (or is dominated by) reuse that task's
  // tuned program instead of a full search of their own, as the reuse selection decides.
  bool reuse = false;
  // Which selection decides reuse: ETO's Steiner tree with one-hop bridges (default; exact
  // enumeration with kExactBridges), its minimum arborescence without bridges, or Selective
  // Tuning's TopK baseline (reused tasks try their group's kTopKPrograms best programs as they
  // are, tune/reuse/top_k_tuner.h, instead of the reuse tuner). The ablations of ETO's paper.
  tune::reuse::SelectionMethod reuse_selection = tune::reuse::SelectionMethod::kGreedyBridges;
};

struct TaskOutcome {
  std::string name;
  double weight = 1;
  // "search" (tuned now), "reuse" (tuned now by the reuse tuner from task `reused_from`'s
  // choice), "records" (tuned earlier), or "skipped" (not worth tuning; the compile call gives
  // it the rules' schedule).
  std::string status;
  int reused_from = -1;          // index into the result's tasks (status "reuse")
  std::string reused_from_name;  // that task's name, or "records:<hash>" for a stored program
  // A bridge operator (ETO): not one of the given tasks but tuned so that they can reuse its
  // program; listed after them. Its weight is that of the tasks reusing through it.
  bool bridge = false;
  schedule::KernelSchedule schedule;  // the choice (search and records)
  CompileReport report;               // the search's candidates (status "search")
  int rounds = 0;
};

struct TuneTasksResult {
  std::vector<TaskOutcome> tasks;
  // Per scheduler round: the task it went to (index into `tasks`), the measurements made so far,
  // and the objective sum_i w_i best_ms_i after it (+inf while some task has no valid time).
  std::vector<int> order;
  std::vector<int> trials_after;
  std::vector<double> objective;
  int round_trials = 0;
  int reuse_trials = 0;  // measurements of the reuse tuner (outside the scheduler's rounds)
  double tune_s = 0;
};

// The measurements per scheduler round for `total` trials over `tasks` tasks: Ansor's batch,
// smaller when the budget would otherwise give each task fewer than a few rounds.
int scheduler_round_trials(int total, int tasks);

TuneTasksResult tune_tasks(const std::vector<TaskSpec>& specs, const TuneTasksRequest& req);

}  // namespace tessera::compiler
