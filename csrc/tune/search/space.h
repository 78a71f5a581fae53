#pragma once
// The search space of search mode (Ansor-like) for one Task: per stage, which sketches are legal
// and which numbers an annotation may take; random sampling of valid schedules; mutation and
// crossover operators for the evolutionary search.
//
// Choices per stage, over the one schedule representation (schedule/annotation.h):
//   sketch        multi-level tiling always; cross-lane reduction where the stage reduces and its
//                 innermost reduce axis is some input's innermost index (rows read contiguously)
//   tiles         per spatial axis four levels: cache-tile count (S0), mid tiles per cache tile
//                 (S1 = tile_outer / tile_mid), register tiles per mid tile (S2 = tile_mid /
//                 tile_reg) and the register tile (S3 = tile_reg); half the samples have no mid
//                 level (S1 = 1, tile_mid empty). Per reduce axis two (R0 count, R1 =
//                 tile_reduce). Cross-lane: points per task.
//   parallel      on/off, and how many outer axes are split in the parallel loop. The lowering
//                 fuses every cache-tile loop into one parallel loop, so "axis a is not fused" is
//                 expressed as tile_outer[a] = the whole (rounded-up) extent.
//   vector        the StageSpace's vector axis (kept: the analytic model and the packing
//                 analysis are relative to it), width = a power of two <= lanes dividing the
//                 register tile
//   packing       on/off per packable operand (vector-axis panels and row operands)
//   unroll        inner-reduce unroll depth (reduce_unroll) and its prefetch hints
//   s1 order      the order of the mid-tile loops (S1) and of the register-tile loops (S2)
// Per kernel, the stage plan (schedule/plan_choices.h): pad ops materialised or inlined into the
// reduction, an elementwise epilogue fused at the write-back or a stage of its own. Each
// combination that plans other stages than the task's own plan is a variant with its own stages
// (their count differs between variants): sample() draws a variant, then its stages; kPlan moves
// a schedule to another variant; crossover mixes schedules of one variant only.
//
// Validity: every schedule the space returns has passed check_structure (the invariants the
// lowering checks, plus a register-file bound) and, for sample(), schedule::lower. Every random
// choice draws from the caller's seeded generator.
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "loop/stmt.h"
#include "schedule/annotation.h"
#include "tune/common.h"
#include "tune/gensor/stage_space.h"

namespace tessera::tune::search {

// Fitted/chosen limits of the space.
struct SpaceLimits {
  // Most inner-reduce unroll depth tried (the lowering accepts up to 32; 16 already unrolls a
  // 16-step reduce tile completely).
  int64_t max_reduce_unroll = 16;
  // Register tile bound: accumulator vectors (register-tile points / vector width) of a reducing
  // stage may use at most this fraction of the vector register file (operands and a broadcast need
  // the rest; a spilled accumulator tile runs from memory).
  double accumulator_register_share = 0.85;
  // Injective stages keep no accumulators; their register tile is only unrolled code: bounded in
  // points so that one tile's unrolled body stays small.
  int64_t max_injective_register_points = 256;
  // Tries of sample() before it gives up (each try is one lowering).
  int max_sample_tries = 64;
};

struct StageChoices {
  gensor::StageSpace space;  // extents, lanes, vector axis, row-packable operands (and the rules')
  // The same space seen by the other sketch: the analytic model dispatches on space.base.sketch.
  gensor::StageSpace cross_lane_space;
  gensor::StageSpace tiling_space;
  bool cross_lane_legal = false;
  int vector_axis = -1;               // multi-level tiling's vector axis (-1: scalar)
  std::vector<std::string> packable;  // inputs the multi-level tiling may pack
  double work = 1;                    // iteration points: mutations pick heavy stages more often
};

enum class Mutation {
  kTileSize,     // move a prime factor between two levels of one axis (S0..S3, or R0/R1)
  kUnroll,       // another reduce_unroll (and prefetch on/off)
  kParallel,     // parallel on/off, or one more / one fewer axis split in the parallel loop
  kVectorWidth,  // another power-of-two width dividing the register tile
  kPack,         // pack / unpack one packable operand
  kOrder,        // swap two loops of the S1 order
  kSketch,       // resample the stage under its other legal sketch
  kPlan,         // another plan variant: stages it shares keep their annotation where valid
                 // (last: drawn only by spaces with more than one variant)
};
inline constexpr int kNumMutations = 8;
const char* mutation_name(Mutation m);

// One stage plan of the task (Task::plan_for of its choices) and the choices of its stages.
struct PlanVariant {
  schedule::PlanChoices choices;
  std::vector<StageChoices> stages;
};

class SearchSpace {
 public:
  explicit SearchSpace(const Task& task, SpaceLimits limits = {});

  const Task& task() const { return task_; }
  const SpaceLimits& limits() const { return limits_; }
  // The plan variants: [0] is the task's own plan, the others plan other stages.
  int num_variants() const { return static_cast<int>(variants_.size()); }
  const PlanVariant& variant(int v) const { return variants_[v]; }
  // Index of the variant with `choices`; -1 when the space does not offer it.
  int variant_index(const schedule::PlanChoices& choices) const;
  // The stages of the task's own plan (variant 0).
  int num_stages() const { return static_cast<int>(variants_[0].stages.size()); }
  const StageChoices& stage(int i) const { return variants_[0].stages[i]; }
  // The stages of the variant `s` is for; throws tessera::Error when the space does not offer
  // its plan choices or `s` has another stage count.
  const std::vector<StageChoices>& stages_of(const schedule::KernelSchedule& s) const;
  // Whether `s` is for an offered variant and has its stage count.
  bool fits_variant(const schedule::KernelSchedule& s) const;

  // A random schedule that lowers; throws tessera::Error when max_sample_tries samples all failed
  // (a space that cannot produce a valid schedule is a bug).
  schedule::KernelSchedule sample(std::mt19937_64& rng) const;
  // A random annotation of one stage of the task's own plan that passes check_stage (not lowered).
  schedule::StageAnnotation sample_stage(int i, std::mt19937_64& rng) const;

  // The invariants the lowering checks (tile multiples, vector width, unroll range, sizes) and
  // the register bound of SpaceLimits, for stage i of the task's own plan. Empty = fine, else
  // why not.
  std::string check_stage(int i, const schedule::StageAnnotation& ann) const;
  // check_stage for every stage of the schedule's variant (an unknown variant or another stage
  // count fails).
  std::string check_structure(const schedule::KernelSchedule& s) const;
  // Lowers `s` with the plan of its choices; nullopt when the lowering throws (the error goes to
  // `why` when given).
  std::optional<loop::LoweredFunc> try_lower(const schedule::KernelSchedule& s,
                                             std::string* why = nullptr) const;

  // `s` changed by one mutation of kind `m` on a random stage where it applies; nullopt when it
  // applies nowhere or its result breaks check_structure.
  std::optional<schedule::KernelSchedule> mutate(const schedule::KernelSchedule& s, Mutation m,
                                                 std::mt19937_64& rng) const;
  // A random mutation kind (a few tries until one applies).
  std::optional<schedule::KernelSchedule> mutate(const schedule::KernelSchedule& s,
                                                 std::mt19937_64& rng) const;
  // Child of `a` and `b`: each stage from either parent; a stage both parents tile with one
  // sketch also mixes per axis (an axis's cache, mid and register tiles travel together). Nullopt
  // when the parents are for different plan variants or the mix breaks check_structure.
  std::optional<schedule::KernelSchedule> crossover(const schedule::KernelSchedule& a,
                                                    const schedule::KernelSchedule& b,
                                                    std::mt19937_64& rng) const;

 private:
  PlanVariant make_variant(const schedule::StagePlan& plan) const;
  schedule::StageAnnotation sample_stage(const StageChoices& c, std::mt19937_64& rng) const;
  schedule::StageAnnotation sample_tiling(const StageChoices& c, std::mt19937_64& rng) const;
  schedule::StageAnnotation sample_cross_lane(const StageChoices& c, std::mt19937_64& rng) const;
  std::string check_stage(const StageChoices& c, const schedule::StageAnnotation& ann) const;
  bool mutate_stage(const StageChoices& c, schedule::StageAnnotation& ann, Mutation m,
                    std::mt19937_64& rng) const;
  // `s` moved to another variant (kPlan).
  std::optional<schedule::KernelSchedule> switch_variant(const schedule::KernelSchedule& s,
                                                         std::mt19937_64& rng) const;
  // Most register-tile points.
  int64_t register_budget(const StageChoices& c, int vector_width) const;
  static int pick_stage(const std::vector<StageChoices>& stages, std::mt19937_64& rng);

  const Task& task_;
  SpaceLimits limits_;
  std::vector<PlanVariant> variants_;
};

// The text that identifies a schedule in the search (its plan choices when not the defaults and
// its stages' JSON; the tuner name is not part of it).
std::string schedule_key(const schedule::KernelSchedule& s);

}  // namespace tessera::tune::search
