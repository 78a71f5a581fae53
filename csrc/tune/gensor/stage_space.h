#pragma once
// The construction space of one stage: its iterators and extents, the sketch the rules chose
// (construct mode picks numbers, not structure), the tile values each iterator may take at each
// ETIR level, and the access-region analysis the analytic model reads.
//
// ETIR levels on the CPU (outermost first): kL2 = the tile one core owns (one parallel task,
// kept in its private L2), kL1 = the part of it reused from L1, kReg = the register tile.
// DRAM is the level the L2 tiles are loaded from.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "cost/access_region.h"
#include "schedule/annotation.h"
#include "schedule/default_schedule.h"
#include "schedule/stage_plan.h"

namespace tessera::tune::gensor {

enum Level : int { kL2 = 0, kL1 = 1, kReg = 2 };
inline constexpr int kNumLevels = 3;
const char* level_name(int level);

struct StageSpace {
  int stage_index = 0;
  std::string op_name;
  // The rules' annotation: sketch, vector axis, packing and parallel flag are kept from it; its
  // tile numbers are what construct mode replaces.
  schedule::StageAnnotation base;
  int num_spatial = 0;
  int num_reduce = 0;
  std::vector<std::string> names;  // iterator names (spatial then reduce)
  std::vector<int64_t> extents;    // constant extents (symbolic ones guessed)
  int vector_axis = -1;            // spatial iterator vectorized (-1: none)
  int lanes = 16;                  // fp32 lanes of the target's SIMD registers
  int num_vector_registers = 32;
  std::shared_ptr<const cost::AccessRegions> regions;
  // Per tensor of `regions`: does its region move with the vector iterator (vector loads) or not
  // (one broadcast serves all lanes)? Does it read along the vector iterator with a unit stride
  // (plain vector loads) or not (gathers, unless the annotation packs it into panels)?
  std::vector<bool> vector_dependent;
  std::vector<bool> vector_contiguous;
  // Per tensor of `regions`: read inside a select of the body (an inlined pad: a bounds test and
  // a select come with each of its loads).
  std::vector<bool> guarded;
  // Broadcast operands the lowering can pack into panels of a row register tile: kernel inputs
  // the vector iterator does not index, with a dimension indexed by exactly the spatial iterator
  // `axis` (the A of a GEMM). Packed, a register tile's rows become neighbours in memory instead
  // of rows a stride apart that compete for the same L1 sets; the rules never pack them, construct
  // mode ranks both.
  struct RowOperand {
    std::string name;
    int axis = -1;
  };
  std::vector<RowOperand> row_packable;
  // ladder[level][iterator]: the values a tile may take, ascending. Empty = not tiled there.
  std::vector<std::vector<int64_t>> ladder[kNumLevels];
  double body_ops = 1;  // arithmetic nodes of the body (compute cost per point of injective stages)

  int num_iters() const { return num_spatial + num_reduce; }
  bool is_reduce(int it) const { return it >= num_spatial; }
  bool cross_lane() const { return base.sketch == schedule::Sketch::kCrossLaneReduction; }
  // Iteration points (spatial x reduce).
  double work() const;
};

// Builds the space of stage `index` of `plan`.
StageSpace make_stage_space(const schedule::StagePlan& plan, int index,
                            const schedule::Target& target);

// Largest power of two <= lanes dividing `tile` (1 when odd): the vector width a register tile of
// `tile` elements along the vector axis is executed with.
int vector_width_for(int64_t tile, int lanes);

// Does the annotation pack tensor `name` into panels?
inline bool is_packed(const schedule::StageAnnotation& ann, const std::string& name) {
  return std::find(ann.pack.begin(), ann.pack.end(), name) != ann.pack.end();
}

// x rounded up to a multiple of m (tiles in whole register tiles).
inline int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

}  // namespace tessera::tune::gensor
