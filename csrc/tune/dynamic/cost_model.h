#pragma once
// DietCode's micro-kernel cost model, in time form.
//
// The micro-kernel is the cache tile of a schedule's main stage (its spatial tile, with the whole
// reduction). An instance of the workload runs it once per tile of its iteration space; the tiles
// are spread over the thread pool in waves (runtime/parallel.h: one contiguous chunk per thread,
// so the slowest thread runs ceil(tiles / threads) of them). Predicted time:
//
//   time = overhead + work x padding x wave / throughput
//
//   work        iteration points of the main stage (spatial x reduce) at the instance's sizes
//   padding     prod over spatial axes of pad(extent, granule) / extent >= 1: the points computed
//               at the edge of the iteration space that lie outside it (see geometry_of)
//   wave        k * pad(tiles, threads) / tiles + (1 - k) >= 1: a partial last wave leaves
//               threads idle; k in [0, 1] says how much of that idleness shows in the time,
//               fitted per machine (k = 1: a wave costs its slowest thread's full chunk)
//   throughput  points per ms of the micro-kernel on full waves, a property of the tile alone
//   overhead    ms per call that do not grow with the instance: waking the thread pool, packing
//               operands whose size does not depend on the dynamic sizes (the weights)
//
// The paper's Eq. 3-5 multiply the padding ratio (>= 1) into a "performance", so that more
// padding would predict a faster kernel; here it multiplies the time. The overhead term is not
// in the paper (a GPU launch is cheap next to its waves); on a CPU the pool wake-up and the
// weight packing of every call are what make small instances slow, and it lets a serial
// micro-kernel win at small sizes.
#include <cstddef>
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
  // Early pruning (before the wave fit and the selection): a micro-kernel predicted slower than
  // this factor times the best one at every sampled size is dropped. (The paper prunes on the
  // micro-kernel's own throughput; a tile that never fills the pool has an inflated full-wave
  // throughput, so the comparison is made on predicted times.)
  double prune_slowdown = 1.5;
  // Instances the wave weight is fitted on (distinct wave ratios pad(tiles, threads) / tiles),
  // each with at least this share of the largest instance's work: on the smallest instances a
  // call's fixed costs and noise outweigh its partial wave.
  int wave_fit_points = 3;
  double wave_fit_min_work = 0.25;
  // ...on a micro-kernel whose wave ratios over the sample points span at least this much:
  // timings at ratios closer than that cannot tell k from their noise, and whatever k is, it
  // moves a prediction by at most about that share.
  double wave_fit_min_spread = 0.1;
  // A micro-kernel whose first call at its calibration point takes this factor times the best
  // prediction there is timed by that one call: it loses there whatever the exact figure.
  double probe_slowdown = 2.0;
  // After pruning, the micro-kernels predicted fastest at the largest instance, this many, are
  // timed there too: the calibration point sits at a quarter of the work, and micro-kernels that
  // tie there can part at the largest, where the most time is spent.
  int largest_contenders = 2;
  // Serial copies are tried only where the thread pool's round trip per call is at least this
  // share of the best predicted time at some sample point. The round trip is what a serial copy
  // saves for certain; elsewhere it is taken to be lost in a timing's noise.
  double serial_min_pool_share = 0.1;
};

// The value of a dimension's expression at the size variables' values `sizes`.
int64_t evaluate_extent(const ir::Expr& e, const std::map<const ir::ExprNode*, int64_t>& sizes);

// Where a schedule's micro-kernel sits in the workload: the main stage's extents (expressions in
// the size variables), its cache tile and padding granule per spatial axis.
struct MicroKernelGeometry {
  size_t stage = 0;                      // the main stage (index into the plan's stages)
  std::vector<ir::Expr> extents;         // spatial axes of the main stage
  std::vector<int64_t> tiles;            // cache tile (tile_outer) per spatial axis
  std::vector<int64_t> granules;         // the edge is computed in steps of this, per axis
  std::vector<ir::Expr> reduce_extents;  // reduce axes of the main stage
  bool parallel = true;                  // tiles are spread over the thread pool
};

// The geometry of `schedule` on `plan`: its main stage is the one with the most iteration points
// at the sizes `at` (values of the plan's size variables). The padding granule follows the main
// stage's edge mode (schedule/annotation.h): an edge cache tile runs only the register tiles
// that hold points, and a cut register tile computes, under kSplit and kGuard, the lanes past the
// end of the vector axis (masked) but no rows past the end -- granule: the register tile on the
// vector axis, 1 on the others; under kLocalPad the whole register tile -- granule: the register
// tile on every axis.
MicroKernelGeometry geometry_of(const schedule::StagePlan& plan,
                                const schedule::KernelSchedule& schedule,
                                const std::map<const ir::ExprNode*, int64_t>& at);

// One instance seen through a micro-kernel.
struct InstanceShape {
  double work = 0;     // iteration points (spatial x reduce)
  double padding = 1;  // computed spatial points / spatial points (1 when there are none)
  int64_t tiles = 0;   // micro-kernel runs
  int threads = 1;     // threads the tiles are spread over
  // pad(tiles, threads) / tiles: 1 on whole waves, threads / tiles when there are fewer tiles.
  double wave_ratio() const;
};

InstanceShape instance_shape(const MicroKernelGeometry& g,
                             const std::map<const ir::ExprNode*, int64_t>& sizes, int threads);

// k * wave_ratio + (1 - k).
double wave_factor(const InstanceShape& s, double wave_k);

// One micro-kernel's fitted numbers: a line, and the timed samples it was fitted to. A
// micro-kernel's throughput changes with the size (cache behaviour, tiles per thread), so
// predictions follow the samples where there are two or more.
struct KernelTimeModel {
  double throughput = 0;   // points per ms on full waves (> 0), the line's
  double overhead_ms = 0;  // per call (>= 0), the line's
  // (u, ms) of the samples, u = work x padding x wave, increasing u (times at one u averaged).
  std::vector<std::pair<double, double>> knots;
};
// With two or more knots: linear between neighbouring knots, the end segments extended beyond
// them (in proportion to u where such a segment falls). Else the line: overhead + work x padding
// x wave / throughput. 0 for an empty instance (nothing runs).
double predict_ms(const InstanceShape& s, const KernelTimeModel& m, double wave_k);

// One timed instance of one micro-kernel.
struct TimeSample {
  InstanceShape shape;
  double ms = 0;
};

// Least squares of ms = overhead + u / throughput with u = work x padding x wave(k). The line
// through the origin (no overhead) is used when the samples cannot separate an overhead (one
// sample, equal u) or the fit gives a negative overhead or slope. The knots are the samples.
// Throws tessera::Error without a usable sample (positive time and work).
KernelTimeModel fit_kernel(const std::vector<TimeSample>& samples, double wave_k);

struct WaveFit {
  double wave_k = 1;  // in [0, 1]
  KernelTimeModel model;
};
// Least squares of ms = overhead + a W + b W x over one micro-kernel's samples (W = work x
// padding, x = wave ratio); k = b / (a + b) clamped to [0, 1], then fit_kernel with that k.
// When the samples do not determine a and b apart (fewer than three, or the system is singular)
// k is `fallback_k`.
WaveFit fit_wave(const std::vector<TimeSample>& samples, double fallback_k);

}  // namespace tessera::tune::dynamic
