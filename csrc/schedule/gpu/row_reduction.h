#pragma once
// GPU schedule for row reductions and what follows them in one kernel (softmax, log-softmax,
// layer and RMS norms, a plain sum or max over some axes): one block per row.
//
// The rows are the output points of the plan's reductions, which must all have the same shape.
// A block runs the stages in order for its row: a reduction stage combines its row's values in
// a register per thread (thread t takes values t, t + threads, ... of the flattened reduce
// axes, so a warp reads neighbouring elements), then a shared-memory tree halves the partials
// (barrier between levels) and the row's result is kept in shared memory, where later stages of
// the block read it. An elementwise stage (an output) walks the points of its row the same
// strided way; it must read some earlier reduction at the row's indices, which tells which of
// its axes are the row axes.
#include <cstdint>
#include <string>

#include "loop/stmt.h"
#include "schedule/stage_plan.h"

namespace tessera::schedule::gpu {

// Most threads per row (a power of two): 8 warps.
constexpr int64_t kRowBlockThreads = 256;
// Fewest threads per row: one warp.
constexpr int64_t kRowMinThreads = 32;

// Lowers `plan`; threads per block: the power of two between kRowMinThreads and
// kRowBlockThreads closest above the longest row (reduce length or points per row). Kernel ABI
// as lower_injective. Throws tessera::Error for a plan without reductions, reductions of
// different shapes, an elementwise stage that reads no reduction at row indices or is not an
// output, or a read of a reduction at other indices than its row's.
loop::LoweredFunc lower_row_reduction(const StagePlan& plan, const std::string& name);

}  // namespace tessera::schedule::gpu
