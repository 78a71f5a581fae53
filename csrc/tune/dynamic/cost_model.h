#pragma once
// DietCode's micro-kernel cost model, in time form.
//
// The micro-kernel is the cache tile of a schedule's main stage (its spatial tile, with the whole
// reduction). An instance of the workload runs it once per tile of its iteration space; the tiles
// are spread over the thread pool in waves (runtime/parallel.h: one contiguous chunk per thread,
// so the slowest thread runs ceil(tiles / threads) of them). Predicted time:
//
//   time = work x padding x wave / throughput
//
//   work        iteration points of the main stage (spatial x reduce) at the instance's sizes
//   padding     prod over spatial axes of pad(extent, tile) / extent >= 1: the edge tiles cost as
//               much as full ones (local padding computes the whole tile)
//   wave        k * pad(tiles, threads) / tiles + (1 - k) >= 1: a partial last wave leaves
//               threads idle; k in [0, 1] says how much of that idleness shows in the time,
//               fitted per machine (k = 1: a wave costs its slowest thread's full chunk)
//   throughput  points per ms of the micro-kernel measured on full waves (padding and wave 1, or
//               divided out of the measurement), so that it is a property of the tile alone
//
// This replaces the paper's Eq. 3-5, which multiply the padding ratio (>= 1) into a performance,
// so that more padding would predict a faster kernel.
#include <cstdint>
#include <map>
#include <vector>

#include "ir/expr.h"
#include "schedule/annotation.h"
#include "schedule/stage_plan.h"

namespace tessera::tune::dynamic {

// The model's chosen constants, in one place.
struct CostModelConstants {
  // Wave weight k before (or without) fitting: a partial wave costs as much as a full one.
  double default_wave_k = 1.0;
  // Micro-kernels whose full-wave throughput is below this fraction of the best one are pruned
  // before any per-size prediction (the paper's early pruning).
  double prune_ratio = 0.6;
  // Points the wave weight is fitted on (distinct wave ratios pad(tiles, threads) / tiles).
  int wave_fit_points = 6;
};

// Where a schedule's micro-kernel sits in the workload: the main stage's extents (expressions in
// the size variables) and its cache tile per spatial axis.
struct MicroKernelGeometry {
  size_t stage = 0;                      // the main stage (index into the plan's stages)
  std::vector<ir::Expr> extents;         // spatial axes of the main stage
  std::vector<int64_t> tiles;            // cache tile (tile_outer) per spatial axis
  std::vector<ir::Expr> reduce_extents;  // reduce axes of the main stage
  bool parallel = true;                  // tiles are spread over the thread pool
};

// The geometry of `schedule` on `plan`: its main stage is the one with the most iteration points
// at the sizes `at` (values of the plan's size variables).
MicroKernelGeometry geometry_of(const schedule::StagePlan& plan,
                                const schedule::KernelSchedule& schedule,
                                const std::map<const ir::ExprNode*, int64_t>& at);

// One instance seen through a micro-kernel.
struct InstanceShape {
  double work = 0;     // iteration points (spatial x reduce)
  double padding = 1;  // padded spatial points / spatial points (1 when there are none)
  int64_t tiles = 0;   // micro-kernel runs
  int threads = 1;     // threads the tiles are spread over
  // pad(tiles, threads) / tiles: 1 on whole waves, threads / tiles when there are fewer tiles.
  double wave_ratio() const;
};

InstanceShape instance_shape(const MicroKernelGeometry& g,
                             const std::map<const ir::ExprNode*, int64_t>& sizes, int threads);

// k * wave_ratio + (1 - k).
double wave_factor(const InstanceShape& s, double wave_k);
// work x padding x wave / throughput (points per ms); 0 for an empty instance.
double predict_ms(const InstanceShape& s, double throughput, double wave_k);
// The throughput that makes predict_ms(s, ., wave_k) equal the measured `ms`.
double throughput_from(const InstanceShape& s, double ms, double wave_k);

// One measurement of one micro-kernel for fitting the wave weight: the instance's wave ratio and
// its measured time per padded point (ms / (work x padding)).
struct WaveSample {
  double wave_ratio = 1;
  double ms_per_point = 0;
};
struct WaveFit {
  double wave_k = 1;      // in [0, 1]
  double throughput = 0;  // points per ms on full waves
};
// Least squares of ms_per_point = (k x + 1 - k) / throughput over the samples' wave ratios x (a
// line a + b x with k = b / (a + b)); k is clamped to [0, 1] and the throughput then refitted.
// Without two distinct wave ratios k is `fallback_k`. Throws tessera::Error without samples.
WaveFit fit_wave(const std::vector<WaveSample>& samples, double fallback_k);

}  // namespace tessera::tune::dynamic
