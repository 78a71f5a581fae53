#pragma once
// Search mode for one task (Ansor-like): rounds of evolutionary search over the task's
// SearchSpace, ranked by a cost model, each round measuring the best-ranked new schedules plus a
// few random ones and retraining the learned model on everything measured so far.
//
// A round:
//   1. ranker: the learned model once it is trained on min_model_samples measured programs (and
//      available: XGBoost compiled in), Gensor's analytic model (sum of the stages' predicted
//      times) before that;
//   2. evolve: a population of `population` schedules (seed_share of it the best measured ones
//      and the given initial schedules, e.g. construct mode's top-k; the rest random samples),
//      `generations` generations of mutation (mutation_prob) or crossover of parents picked in
//      proportion to their scores; every individual ever scored competes for the picks;
//   3. pick per_round schedules not measured before: eps_greedy of them random samples, the rest
//      among the best-ranked diversity_pool times as many, for the knob values they cover
//      (diverse_pick.h; the first round also takes the initial schedules when measure_initial);
//   4. measure them through the caller's function (production: CandidateMeasurer::measure_all,
//      which builds, verifies against the default schedule and times), record every result in
//      the training set (label: throughput over the task's best; failed = 0), retrain.
// A search that died half-way goes on through restore(): its measured trials count, and nothing
// is measured twice.
// Search overhead (sampling, lowering, features, prediction, evolution, training) is timed apart
// from measurement. Children of mutation/crossover pass the space's structural check; they are
// lowered when the learned model needs their features and always before they are measured.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>

#include "cost/cost_model.h"
#include "cost/memory_levels.h"
#include "schedule/annotation.h"
#include "tune/common.h"
#include "tune/search/program_features.h"
#include "tune/search/space.h"

namespace tessera::tune::search {

// Measures candidates; one result per schedule, in order.
using Measure =
    std::function<std::vector<CandidateResult>(const std::vector<schedule::KernelSchedule>&)>;

struct EvolutionOptions {
  int population = 2048;        // Ansor's default
  int generations = 4;          // Ansor's default
  double mutation_prob = 0.85;  // a child is a mutant, else a crossover child (Ansor: 0.85)
  double seed_share = 0.2;      // at most this share of the first population are seeds
};

struct SearchOptions {
  int trials = 256;          // measurements in all
  int per_round = 64;        // measurements per round (Ansor's batch)
  double eps_greedy = 0.05;  // share of each round's picks that are random samples
  // The ranked picks are chosen for the knob values they cover (diverse_pick.h) among this many
  // times as many best-ranked candidates; 1: the best-ranked alone.
  int diversity_pool = 2;
  int min_model_samples = 64;   // measured programs before the learned model ranks
  bool retrain = true;          // ablation: false trains the learned model once, at first use
  bool measure_initial = true;  // the first round measures the initial schedules
  std::vector<schedule::KernelSchedule> initial;  // construct mode's top-k, the default...
  EvolutionOptions evolution;
  SpaceLimits space;
  uint64_t seed = 0;
  // Machine of the analytic model; host_memory_hierarchy() when empty.
  std::optional<cost::MemoryHierarchy> hardware;
  // The model arrives trained (loaded from the records database, or trained on other tasks of
  // this process): it ranks from the first round, whatever the training set holds.
  bool model_ready = false;
};

// Scores (higher = better) of schedules; -infinity for one that is not valid.
using Scorer = std::function<std::vector<double>(const std::vector<schedule::KernelSchedule>&)>;

struct Scored {
  schedule::KernelSchedule schedule;
  double score = 0;
};

struct EvolutionStats {
  int scored = 0;    // distinct schedules scored
  int children = 0;  // mutants and crossover children made
  double sample_s = 0;
  double evolve_s = 0;  // the whole call (sampling and scoring included)
};

// Up to n distinct schedules whose keys are not in `exclude`, best score first.
std::vector<Scored> evolve(const SearchSpace& space, const Scorer& scorer,
                           const std::vector<schedule::KernelSchedule>& seeds,
                           const std::unordered_set<std::string>& exclude, int n,
                           const EvolutionOptions& options, std::mt19937_64& rng,
                           EvolutionStats* stats = nullptr);

struct Trial {
  schedule::KernelSchedule schedule;
  CandidateResult result;
  int round = 0;          // numbered on from the restored trials' rounds (see restore)
  std::string picked_by;  // "initial", "analytic", "model", "random" or "restored"
  double score = 0;       // the ranker's score when picked (0 for initial and random picks)
};

// Wall time of a search, split by what it did. Components overlap (evolve_s contains the
// sampling, lowering, features and prediction done inside evolution); overhead_s() is everything
// but the measurement.
struct SearchStats {
  double sample_s = 0;   // random samples (their validation lowering included)
  double lower_s = 0;    // lowering for features and of the picks before measurement
  double feature_s = 0;  // feature extraction
  double predict_s = 0;  // ranking (analytic or learned)
  double evolve_s = 0;   // evolution in all
  double train_s = 0;    // fitting the learned model
  double measure_s = 0;  // the caller's measure function
  double total_s = 0;
  int scored = 0;  // schedules ranked
  int analytic_rounds = 0;
  int model_rounds = 0;
  double overhead_s() const { return total_s - measure_s; }
};

struct SearchResult {
  bool found = false;  // some measured candidate was ok
  schedule::KernelSchedule best;
  double best_ms = std::numeric_limits<double>::infinity();  // +inf until found
  std::vector<Trial> trials;
  int rounds = 0;
  // Trials measured by an earlier search, taken by restore(): the first ones of `trials`.
  int restored = 0;
  SearchStats stats;
};

// The state of one task's search, one round at a time (the task scheduler interleaves tasks).
class TaskSearcher {
 public:
  TaskSearcher(const Task& task, SearchOptions options);

  // One round (see the header comment); returns how many candidates it measured (0 when the
  // budget is spent or the space has nothing new).
  int round(const Measure& measure, cost::CostModel& model, cost::TrainingSet& data);
  // Takes the trials of an earlier search of this task (killed before it finished), before the
  // first round: they count towards the trial budget, their schedules are never measured again,
  // they join the training set (labelled as new measurements are) and the best of them is the
  // best so far and seeds evolution. A schedule given twice counts once (the first). Their
  // kernels are not in memory. Returns how many were taken.
  int restore(std::vector<Trial> earlier, cost::TrainingSet& data);
  // The number the trials of the next round get.
  int next_round() const { return first_round_ + result_.rounds; }
  bool done() const;
  const SearchResult& result() const { return result_; }
  // The evolution's population from the next round on (at least 2).
  void set_population(int population) { options_.evolution.population = std::max(2, population); }
  int population() const { return options_.evolution.population; }
  const SearchSpace& space() const { return space_; }

 private:
  std::vector<double> analytic_scores(const std::vector<schedule::KernelSchedule>& batch);
  std::vector<double> model_scores(const std::vector<schedule::KernelSchedule>& batch,
                                   const cost::CostModel& model);
  // Adds a measured trial: measured set, training set (`lowered`: its loop IR, null when it does
  // not lower, then it is not trained on), best so far, result_.trials.
  void record_trial(Trial trial, const loop::LoweredFunc* lowered, cost::TrainingSet& data);

  const Task& task_;
  double work_;  // the task's iteration points: the features' work normaliser
  SearchOptions options_;
  SearchSpace space_;
  std::mt19937_64 rng_;
  ProgramFeaturizer featurize_;  // holds the memory hierarchy of the analytic estimates
  std::unordered_set<std::string> measured_;
  bool exhausted_ = false;
  int first_round_ = 0;  // after the restored trials' last round
  SearchResult result_;
};

// Rounds until options.trials measurements, with its own training set.
SearchResult search_task(const Task& task, const SearchOptions& options, const Measure& measure,
                         cost::CostModel& model);

}  // namespace tessera::tune::search
