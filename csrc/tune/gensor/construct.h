#pragma once
// Construct mode: Gensor's graph-based construction of a schedule for one task, in seconds.
//
// Per stage of the task: build its ETIR space, walk it (Gensor: several annealed Markov chains;
// Roller: one greedy path), map every distinct visited state to a schedule annotation, and rank
// the distinct annotations with the analytic time model. The stage with the most work gets its
// top-k annotations measured (build, verify against the default schedule's output, time); the
// other stages (pads, small reductions) take their best-ranked annotation. The fastest verified
// candidate is the result; predict-only mode measures nothing and returns rank 0.
//
// The result is an ordinary schedule::KernelSchedule (tuner "construct:gensor" or
// "construct:roller") plus metadata (predicted and measured times, walk statistics) for the
// records database.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cost/memory_levels.h"
#include "schedule/annotation.h"
#include "tune/common.h"
#include "tune/gensor/model.h"
#include "tune/gensor/walk.h"
#include "util/json.h"

namespace tessera::tune::gensor {

enum class ConstructMode { kGensor, kRoller };
const char* construct_mode_name(ConstructMode m);
ConstructMode construct_mode_from_name(const std::string& name);  // "gensor" | "roller"

struct ConstructOptions {
  ConstructMode mode = ConstructMode::kGensor;
  uint64_t seed = 0;
  int top_k = 8;
  bool predict_only = false;
  Eq1Form eq1 = Eq1Form::kPrinted;  // measured better, see benchmarks/ops.py ablation
  bool interleave = true;           // Gensor's setVThread action (Roller never interleaves)
  int iterations = 80;              // per chain: T halves from 1 to 2^-iterations
  int chains = 32;
  // Measure the rules' default schedule alongside the top-k, so construct mode never returns a
  // kernel slower than the untuned one (the analytic model misranks some shapes; measuring one
  // more candidate is cheap insurance).
  bool include_default = true;
  // Also measure, beyond top_k, the ranked candidates' local-padded variants and the top one
  // with the rules' annotations for the other stages (the model prices neither edge code nor
  // every stage well). Never in predict-only mode; off where a caller counts its measurements
  // against a budget (ALT's layout stage).
  bool measure_variants = true;
  MeasureConfig measure;
  // Machine description; host_memory_hierarchy() (probed once, cached on disk) when empty.
  std::optional<cost::MemoryHierarchy> hardware;
};

struct ConstructCandidate {
  schedule::KernelSchedule schedule;
  double predicted_ms = 0;
  bool measured = false;
  CandidateResult result;  // valid when measured
};

struct ConstructResult {
  schedule::KernelSchedule schedule;  // the choice
  std::string mode;
  uint64_t seed = 0;
  std::string eq1;
  bool interleave = true;
  bool predict_only = false;
  bool fell_back_to_default = false;           // every measured candidate failed verification
  int chosen = -1;                             // index into candidates (-1: default schedule)
  std::vector<ConstructCandidate> candidates;  // ranked by prediction, best first (top-k)
  double construct_s = 0;                      // total wall time of the call
  double search_s = 0;                         // walks + ranking
  double measure_s = 0;                        // reference + candidate builds and timings
  int main_stage = 0;
  int states_visited = 0;  // distinct ETIR states over all stages
  int walk_steps = 0;
  int revisits = 0;
  int top_results = 0;  // Alg. 1's top_results list length (all chains, all stages)
  // Predicted time of the state the paper returns (the last state of the walk; Roller: the end
  // of its path), for comparison with the ranked choice.
  double last_state_predicted_ms = 0;
  int distinct_schedules = 0;  // distinct annotations of the main stage

  std::vector<double> predicted_ms() const;
  std::vector<double> measured_ms() const;  // -1 where not measured or failed
  util::Json to_json() const;               // metadata (schedule included as JSON)
};

ConstructResult construct(const Task& task, const ConstructOptions& options = {});

// Construct mode as the tuning policy (schedule/tuning_policy.h) runs it: its top-k, chains and
// iterations, with this seed. The compile call's construct mode and search mode's seeds use it.
ConstructOptions policy_construct_options(uint64_t seed);

// The ranked, distinct annotations one stage's walk produces (exposed for tests and tools).
struct RankedAnnotation {
  schedule::StageAnnotation annotation;
  Prediction prediction;
};
std::vector<RankedAnnotation> rank_stage(const StageSpace& sp, const AnalyticModel& model,
                                         const std::vector<EtirState>& states);
// `ann` with the rules' register tile (the tuned micro-kernel) and its cache tiles rounded up to
// multiples of it; nullopt when `ann` has it already or the rules vectorise another axis.
// rank_stage adds these.
std::optional<schedule::StageAnnotation> with_rules_register_tile(
    const StageSpace& sp, const schedule::StageAnnotation& ann);
// `ann` with its register tile one row larger, along each non-vector axis where the larger tile
// still fits the register file; cache tiles rounded up as above. The walk's register steps are
// its last and fewest, and the rules size one row axis only, so a larger micro-kernel the model
// ranks first can go unvisited (ResNet's 3x3 256-channel conv at 14x14: 32 channels x 2 rows x
// 7 columns was never reached; the rules' 32 x 7 ran 10-15% slower). rank_stage adds these.
std::vector<schedule::StageAnnotation> with_grown_register_tiles(
    const StageSpace& sp, const AnalyticModel& model, const schedule::StageAnnotation& ann);
// `ann` with the whole reduction in one reduce tile (the reused panel stays in L2, the other
// operands stream) and its innermost S1 axis's cache tile 1, 2, 4 and 8 times as long (capped at
// the extent); empty when `ann` already covers the reduction. rank_stage adds these.
std::vector<schedule::StageAnnotation> streamed_variants(const StageSpace& sp,
                                                         const schedule::StageAnnotation& ann);
// For `ann` whose register tile does not divide the vector axis (kSplit edge tiles of a few
// lanes): `ann` with local padding (EdgeMode::kLocalPad) and its register tile over the whole
// vector axis rounded up to the vector width (rows dropped to 1 where that would not fit the
// register file; without the longer run when even that does not fit); nullopt otherwise.
// construct() measures these for every ranked candidate.
std::optional<schedule::StageAnnotation> local_padded_variant(const StageSpace& sp,
                                                              const AnalyticModel& model,
                                                              const schedule::StageAnnotation& ann);
// Indices (ascending) of up to k entries of `ranked` to measure: best-ranked first, at most
// `per_cache_tile` sharing one cache tiling (tile_outer, tile_reduce) and at most half of k
// sharing one register tile, unless too few remain.
std::vector<size_t> pick_diverse(const std::vector<RankedAnnotation>& ranked, size_t k,
                                 int per_cache_tile = 2);

}  // namespace tessera::tune::gensor
