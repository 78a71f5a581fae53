#pragma once
// GPU schedule for reductions with reuse (matmul, batch matmul, conv2d): Ansor's SSSRRSRS sketch.
//
// Every spatial axis a of the reduction (the output dims) is split into
//   block (blockIdx) x vthread x thread (threadIdx) x inner,
// so a block computes a tile of vthread[a] * thread[a] * inner[a] points along a, and each
// thread holds vthread x inner accumulators per axis in registers (a register tile; the vthread
// copies are strided by thread * inner, which keeps neighbouring threads on neighbouring points
// when inner is 1). Every reduce axis b is split into steps of stage[b] values; per step the
// threads of the block first copy the operand regions the step reads into shared memory together
// (shared_staging.h), meet at a barrier, then run the step's reduce loop (its innermost
// unroll[b] values unrolled) over the register tile, and meet again before the next step
// overwrites the tiles. The write-back applies the fused elementwise epilogue, as on CPU.
//
// Blocks and threads are one-dimensional (blockIdx.x, threadIdx.x), unflattened row-major into
// per-axis indices. Sizes need not divide: points past an axis's extent and reduce values past a
// reduce extent are computed on nothing (guarded) and never written.
#include <cstdint>
#include <string>
#include <vector>

#include "loop/stmt.h"
#include "schedule/stage_plan.h"

namespace tessera::schedule::gpu {

struct GpuTileConfig {
  // Per spatial axis of the reduction, in output-dim order.
  std::vector<int64_t> vthread, thread, inner;
  // Per reduce axis: values per shared-memory step, and how many of them are unrolled (a
  // divisor of stage).
  std::vector<int64_t> stage, unroll;

  int64_t threads() const;
  std::string text() const;  // "vthread=[1,1] thread=[16,16] inner=[4,4] stage=[16] unroll=[4]"
};

// Static shared memory one block may use without opting in to more (48 KiB on every CUDA GPU).
constexpr int64_t kMaxStaticSharedBytes = 48 * 1024;
// Threads per block: CUDA's limit.
constexpr int64_t kMaxBlockThreads = 1024;
// Target block size of the default configuration: 8 warps.
constexpr int64_t kDefaultTiledThreads = 256;

// Whether `plan` has the form this schedule takes: one stage, a reduction (with or without an
// epilogue), every other compute inlined.
bool is_tiled_reduction_plan(const StagePlan& plan);

// Whether the reduction reads some operand that a spatial axis does not index (data a block's
// threads share, which is what staging pays for).
bool has_operand_reuse(const StagePlan& plan);

// How many distinct operands of the reduction are reused that way: 2 for a matmul or a conv (each
// operand is shared along the other's axes), 1 for a row sum that reads a broadcast bias.
int reused_operands(const StagePlan& plan);

// Bytes of shared memory the staged tiles of `config` take (the capacity a tuner must respect:
// at most kMaxStaticSharedBytes).
int64_t tiled_shared_bytes(const StagePlan& plan, const GpuTileConfig& config);

// A configuration for the plan's reduction: 16x16 threads over the two innermost spatial axes
// wider than one, up to 4x4 points each, reduce steps of up to 16 values on the innermost reduce
// axis (whole small axes otherwise), shrunk until the staged tiles fit in shared memory.
GpuTileConfig default_tile_config(const StagePlan& plan);

// Lowers the plan (is_tiled_reduction_plan) with `config`. Kernel ABI as lower_injective.
// Throws tessera::Error for another plan form, a configuration of the wrong arity, an unroll
// that does not divide its stage, too many threads, or staged tiles over kMaxStaticSharedBytes.
loop::LoweredFunc lower_tiled_reduction(const StagePlan& plan, const GpuTileConfig& config,
                                        const std::string& name);

}  // namespace tessera::schedule::gpu
