#pragma once
// Gensor's construction on GPU for the tiled reduction schedule (schedule/gpu/tiled_reduction.h):
// the memory levels global -> shared -> registers, walked by the same annealed Markov chains as
// on CPU (walk.h: roulette over normalised benefits, g(t) on the cache action).
//
// State: the current level; at the shared level a block tile per spatial axis and a step per
// reduce axis (what a block stages in shared memory); at the register level a register tile per
// spatial axis (points per thread) and its vthread factor. Actions: tile(d) / invTile(d) (next
// / previous ladder value of d's tile at the current level: powers of two, and the whole extent
// for short reduce axes), cache (shared -> registers, irreversible), setVThread(d) (double d's
// vthreads, at most its register tile: the paper's bank-conflict fix). Benefit of an action =
// predicted time before / after (gpu_model.h); an infeasible result has benefit 0.
// A state maps to a GpuTileConfig (gpu_state_config): thread = block tile / register tile,
// vthread, inner = register tile / vthread, stage = step. Every distinct visited state, and the
// rules' default configuration, is ranked by predicted time (predict-only: no device measures them
// yet).
#include <cstdint>
#include <string>
#include <vector>

#include "cost/gpu_hardware.h"
#include "schedule/gpu/tiled_reduction.h"
#include "schedule/stage_plan.h"
#include "tune/gensor/gpu_model.h"

namespace tessera::tune::gensor {

struct GpuEtirState {
  int level = 0;                 // 0: shared (block tiles, steps), 1: registers
  std::vector<int64_t> block;    // per spatial axis
  std::vector<int64_t> reg;      // per spatial axis; divides block
  std::vector<int64_t> vthread;  // per spatial axis; divides reg
  std::vector<int64_t> step;     // per reduce axis

  bool operator==(const GpuEtirState& o) const;
};

// The configuration of a state. At the shared level the register tile is implicit: threads are
// laid out as in the default (up to 16 on each of the two innermost axes longer than one) and
// each takes the rest of the block tile; the cache action makes that the starting register tile.
schedule::gpu::GpuTileConfig gpu_state_config(const GpuTileSpace& sp, const GpuEtirState& s);

struct GpuConstructOptions {
  uint64_t seed = 0;
  int chains = 16;
  int iterations = 80;     // per chain: T halves from 1 to 2^-iterations
  bool interleave = true;  // the setVThread action
  // Every other chain starts from the rules' default block tiles and steps (at the shared
  // level, register tiles 1) instead of the smallest tiles. From the smallest tiles a chain
  // needs a dozen tile actions at the shared level before the cache action, whose weight grows
  // with t, moves it on; most chains cache early and end with small blocks.
  bool warm_start = true;
  int top_k = 8;
};

struct GpuConstructResult {
  schedule::gpu::GpuTileConfig config;  // the best-ranked
  GpuPrediction prediction;
  std::vector<schedule::gpu::GpuTileConfig> top;  // top_k distinct, best first
  std::vector<double> top_predicted_ms;
  int states_visited = 0;
  int steps = 0;
};

// The walk's start: block, register tiles and steps 1, no vthreads, at the shared level.
GpuEtirState initial_gpu_state(const GpuTileSpace& sp);
// The warm start: the default configuration's block tiles (rounded up to powers of two) and
// steps, register tiles 1, at the shared level.
GpuEtirState warm_gpu_state(const GpuTileSpace& sp);

// Throws tessera::Error when the plan is not a tiled reduction or no visited state is feasible.
GpuConstructResult construct_gpu(const schedule::StagePlan& plan, const cost::GpuHardware& hw,
                                 const GpuConstructOptions& options = {});

}  // namespace tessera::tune::gensor
