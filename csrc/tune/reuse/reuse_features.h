#pragma once
// CPU counterparts of ETO's GPU features and shape costs (Sec. 3 and 5.1), for one
// multi-level-tiled stage of Tessera's SSRSRS sketch (schedule/annotation.h).
//
//   GPU (paper)                     CPU (Tessera)
//   B  thread blocks                parallel tasks: cache tiles (S0) over all spatial axes
//   T  threads over all blocks      register tiles over all tasks (B x register tiles per task)
//   M  shared memory over blocks    B x bytes of the operand panels one task reads per outer
//                                   reduce step (R0): the cache tile's inputs over one reduce tile
//   BShape  block's output tile     the cache tile (tile_outer, clamped to the extents)
//   TShape  thread's output tile    the register tile (tile_reg)
//   LShape  cooperative fetches     outer-reduce trip counts per reduce axis: ceil(K / tile_reduce)
// As in the paper's Example 3, B, T and M are totals over all tasks.
//
// Shape costs (the paper's two cost models, on the CPU memory hierarchy):
//   BShape cost: cache lines every task fetches from L3/DRAM, assuming each task reads its whole
//     input footprint (cache tile x full reduction) once and every task fetches as many lines as
//     the first (the paper's assumptions for GetBShape).
//   TShape cost: L1 loads per multiply-add of one register tile's inner reduce step (vector loads
//     for operands that move with the vector axis, one broadcast per element for the others),
//     assuming each operand element is loaded once per step (the paper's assumption for
//     GetTShape); a tile whose accumulators exceed the register budget search mode allows
//     (search::SpaceLimits::accumulator_register_share) is infeasible.
#include <cstdint>
#include <optional>
#include <vector>

#include "schedule/annotation.h"
#include "tune/gensor/stage_space.h"

namespace tessera::tune::reuse {

struct ReuseFeatures {
  std::vector<int64_t> bshape;  // per spatial axis
  std::vector<int64_t> tshape;  // per spatial axis
  std::vector<int64_t> lshape;  // per reduce axis
  double tasks = 0;             // B
  double register_tiles = 0;    // T
  double panel_bytes = 0;       // M
};

// Features of `ann` (a multi-level tiling of stage `sp`). Throws tessera::Error for a cross-lane
// annotation or one whose tile lists do not match the stage's axes.
ReuseFeatures reuse_features(const gensor::StageSpace& sp, const schedule::StageAnnotation& ann);

// Cache lines fetched from L3/DRAM by all tasks with cache tile `bshape` (see above).
double bshape_cost(const gensor::StageSpace& sp, const std::vector<int64_t>& bshape);
// L1 loads per multiply-add with register tile `tshape`; nullopt when its accumulators exceed
// the register budget.
std::optional<double> tshape_cost(const gensor::StageSpace& sp, const std::vector<int64_t>& tshape);

// GetBShape: the cheapest cache tile that cuts the spatial axes into exactly `tasks` tiles (edge
// tiles allowed, as the lowering allows them at the cache level); nullopt when none does.
std::optional<std::vector<int64_t>> get_bshape(const gensor::StageSpace& sp, int64_t tasks);
// GetTShape: the cheapest register tile dividing `bshape` with exactly `tiles_per_task` register
// tiles per cache tile; nullopt when none fits the register budget.
std::optional<std::vector<int64_t>> get_tshape(const gensor::StageSpace& sp,
                                               const std::vector<int64_t>& bshape,
                                               int64_t tiles_per_task);
// GetLShape: the outer-reduce trip counts, with at most one reduce axis split (a divisor of its
// extent), whose panel bytes per task with `bshape` are closest to `panel_bytes_per_task` (on a
// log scale; ties to fewer trips).
std::vector<int64_t> get_lshape(const gensor::StageSpace& sp, const std::vector<int64_t>& bshape,
                                double panel_bytes_per_task);

// Bytes of the input panels one task with cache tile `bshape` reads per outer reduce step when
// the reduction runs in `lshape` trips per reduce axis.
double panel_bytes_per_task(const gensor::StageSpace& sp, const std::vector<int64_t>& bshape,
                            const std::vector<int64_t>& lshape);

}  // namespace tessera::tune::reuse
