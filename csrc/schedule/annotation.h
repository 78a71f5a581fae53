#pragma once
// Schedules: a sketch (the loop structure, chosen by rules from the compute pattern) plus an
// annotation (the numbers: tile sizes, vector width, packing). Every tuner works on this one
// representation and it round-trips through JSON, so a record made by one tuner is readable by all.
#include <map>
#include <string>
#include <vector>

#include "schedule/plan_choices.h"
#include "util/json.h"

namespace tessera::schedule {

// Loop structure of one stage (one materialised compute op, possibly with a fused epilogue).
//
// kMultiLevelTiling ("SSRSRS", Ansor's CPU sketch S0 S1 R0 S2 R1 S3):
//   parallel for cache tiles (all spatial axes, tile_outer)          S0
//     for mid tiles inside the cache tile (tile_mid, s1_order)        S1
//       for outer reduce tiles (tile_reduce)                          R0
//         for register tiles inside the mid tile (s1_order)           S2
//           for inner reduce steps                                    R1
//             register tile (tile_reg): unrolled, vector_axis vectorized   S3
// Without a mid level (tile_mid empty, or equal to tile_outer) S1 has one trip and is not
// emitted: the nest is S0 R0 S2 R1 S3, the three-level structure schedules had before tile_mid.
// A stage without reduction axes uses the same structure without R0/R1 (injective sketch).
// kCrossLaneReduction: per output point, the innermost reduce axis is vectorized into
// vector_width partial accumulators that are combined across lanes at the end (rfactor).
enum class Sketch { kMultiLevelTiling, kCrossLaneReduction };
const char* sketch_name(Sketch s);
Sketch sketch_from_name(const std::string& name);

// How multi-level tiling computes register tiles cut by the end of an axis (DietCode's
// "automatic padding" choices; kCrossLaneReduction bounds its own loops and ignores it).
enum class EdgeMode {
  // Edge variants: full tiles unrolled with register accumulators; a tile cut along rows keeps
  // vector code with accumulators in memory; one cut along the vector axis masks lanes; without
  // a vector axis a cut tile runs a scalar nest.
  kSplit,
  // Local padding: a cut tile runs the full tile's code (unrolled, register accumulators,
  // unpredicated compute) on reads that are safe past the end -- zero-filled packed panels or
  // indices clamped into the tensor -- and writes back only its valid part (rows bounded, lanes
  // masked). Full tiles run the same body when no read needs a clamp, else the full-tile code.
  kLocalPad,
  // If-checks: one nest whose every point is predicated, in the inner loop too (the ablation
  // baseline of DietCode's Figure 7a).
  kGuard,
};
const char* edge_mode_name(EdgeMode e);
EdgeMode edge_mode_from_name(const std::string& name);  // throws tessera::Error

struct StageAnnotation {
  Sketch sketch = Sketch::kMultiLevelTiling;
  std::string op;                   // name of the stage's op (for readability and checks)
  std::vector<int64_t> tile_outer;  // per spatial axis: cache tile (multiple of tile_mid)
  // Per spatial axis: mid tile, a multiple of tile_reg dividing tile_outer (so that mid tiles
  // partition a cache tile exactly and edges stay where tile_outer puts them: only cache tiles
  // can pass the end of an axis). Empty = no mid level, the same as tile_mid == tile_outer.
  std::vector<int64_t> tile_mid;
  std::vector<int64_t> tile_reg;     // per spatial axis: register tile
  std::vector<int64_t> tile_reduce;  // per reduce axis: inner reduce tile
  int vector_axis = -1;              // spatial axis vectorized in the register tile, -1 = none
  int vector_width = 1;              // lanes; tile_reg[vector_axis] is a multiple of it
  std::vector<int> s1_order;         // S1 loop order (spatial axis ids), outermost first
  std::vector<std::string> pack;     // inputs repacked into vector_axis panels before the loop
  bool parallel = true;              // distribute cache tiles over the thread pool
  int64_t reduce_unroll = 1;         // inner reduce steps unrolled per loop iteration
  bool prefetch =
      false;  // hint later register tiles' operands per unrolled group (tile_prefetch.h)
  EdgeMode edge = EdgeMode::kSplit;  // cut register tiles (written to JSON when not kSplit)
  // Multi-level tiling of a band product (skewed_tiling.h): the spatial axis whose register
  // rows share the vectors of reads indexed by skew_axis + vector_axis, -1 = none. Honoured
  // where the stage allows it (skewed_tiling_applies), else the stage lowers as plain
  // multi-level tiling; written to JSON when set.
  int skew_axis = -1;

  // The S1 loops' order: s1_order, or the axes in order when it is empty.
  std::vector<int> s1_loop_order() const;
  // The mid tile of each spatial axis: tile_mid, or tile_outer when it is empty.
  std::vector<int64_t> mid_tiles() const;
  // Whether some axis has more than one mid tile per cache tile (the S1 level loops).
  bool has_mid_level() const;

  util::Json to_json() const;
  static StageAnnotation from_json(const util::Json& j);
};

struct KernelSchedule {
  // The stage plan the stages annotate (plan_stages with these choices): written as "plan" only
  // when not the defaults.
  PlanChoices plan;
  std::vector<StageAnnotation> stages;  // in the order of the plan's stages
  std::string tuner = "default";        // who produced it: default, construct, search, reuse...
  // Layouts (layout/layout.h text) by tensor name: the DAG the stages annotate is the workload's
  // DAG relaid with these (layout/relayout.h). Empty for PyTorch's row-major layouts. Written to
  // JSON only when not empty; not part of stages_text (over a given DAG the stages alone decide
  // the kernel).
  std::map<std::string, std::string> layouts;

  util::Json to_json() const;
  static KernelSchedule from_json(const util::Json& j);
  std::string dump() const { return to_json().dump(); }
  // The text of the stages alone (and of the plan choices when they are not the defaults): equal
  // for two schedules that build the same kernel, whichever tuner produced them (tile_mid is
  // written only when has_mid_level()).
  std::string stages_text() const;
  static KernelSchedule parse(const std::string& text) {
    return from_json(util::Json::parse(text));
  }
};

}  // namespace tessera::schedule
