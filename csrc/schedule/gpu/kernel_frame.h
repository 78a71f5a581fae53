#pragma once
// The frame every GPU lowering shares: the kernel's arguments and its launch loops. What differs
// between the injective, row and tiled schedules is only the per-thread body and the grid size.
#include <cstdint>

#include "loop/stmt.h"
#include "schedule/lower_access.h"
#include "schedule/stage_plan.h"

namespace tessera::schedule::gpu {

// Appends plan.inputs then plan.outputs to f->args as global buffers (schedule::lower's ABI) and
// binds each in `al`, so reads and writes of those tensors lower to their arguments.
void bind_plan_args(const StagePlan& plan, loop::LoweredFunc* f, AccessLowering* al);

// `f` with body `for bx in [0, blocks) (blockIdx.x) { for tx in [0, threads) (threadIdx.x)
// { thread_body } }` and the DAG's size variables, after the loop-IR passes (loop/pipeline.h).
loop::LoweredFunc finish_launch(loop::LoweredFunc f, const StagePlan& plan, const ir::Var& bx,
                                const ir::Expr& blocks, const ir::Var& tx, int64_t threads,
                                loop::Stmt thread_body);

}  // namespace tessera::schedule::gpu
