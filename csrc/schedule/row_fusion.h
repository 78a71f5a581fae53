#pragma once
// Row fusion: consecutive stages that walk the same rows share one parallel loop.
//
// Softmax and the norms lower to a chain of stages over the same rows: a row reduction (max,
// mean), another that reads it (sum of exp, variance), then the elementwise output that reads
// both. Lowered separately, each is its own parallel loop: three thread-pool dispatches, and each
// row comes back from L2 or memory three times. When every stage of the chain tiles the rows
// alike and reads the earlier stages' results only in its own rows, the loops are legal to merge:
// task t runs stage 1's tile t, then stage 2's tile t, ..., while the row is still in L1.
#include <vector>

#include "loop/stmt.h"
#include "schedule/annotation.h"
#include "schedule/stage_plan.h"

namespace tessera::schedule {

// Groups of consecutive stage indices (in order, covering every stage once) whose loops may
// share one parallel loop. Legality: no packed operands; same `parallel` flag; the group's first
// stage defines the rows (all its spatial axes); every later stage starts with axes of the same
// extents, tiled the same way, and has its remaining axes in one tile (so the task counts and
// the rows of task t agree); every read of an earlier stage of the group is at the reader's own
// row indices.
std::vector<std::vector<size_t>> row_fusion_groups(const StagePlan& plan,
                                                   const KernelSchedule& schedule);

// Merges stage loops `loops` (each the stage's outermost tile loop, as the sketches lower it,
// all with the same trip count) into one loop over the first one's variable.
loop::Stmt merge_row_loops(const std::vector<loop::Stmt>& loops);

// The stage's outermost tile loop, if the lowered stage is exactly one (not wrapped in packs or
// allocations); null otherwise.
loop::Stmt as_tile_loop(const loop::Stmt& lowered_stage);

}  // namespace tessera::schedule
