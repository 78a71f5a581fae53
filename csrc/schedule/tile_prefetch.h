#pragma once
// Software prefetch for the register-tile loops of multi-level tiling.
//
// At the start of each unrolled group of inner reduce steps (reduce_unroll), a register tile hints
// the data a *later* register tile will read, so that it arrives while this one computes:
//  - operands that change with the innermost register-tile loop (the A rows of a GEMM when rows
//    are inner) are hinted for the next register tile, at the same reduce step, into L1;
//  - operands that stay put over the innermost register-tile loop but change with the one around
//    it (the B panel) are hinted for the next outer iteration into L2, spread over all inner
//    iterations: loading that panel on first use would stall the first register tile on
//    last-level-cache bandwidth (estimate: a 32 KiB panel at 31 GB/s takes about twice that
//    tile's compute).
// One hint per cache line the later tile reads at the group's first step. With groups of 8 fp32
// steps and rows contiguous along the reduction, every line is hinted once or twice.
// The rules and construct mode hint every unrolled reduction (unroll_inner_reduce); the search
// turns the hints on and off as one of its mutations.
#include <vector>

#include "ir/expr.h"
#include "loop/stmt.h"

namespace tessera::schedule {

// The loop variables a register tile's accesses are written in.
struct TileLoops {
  std::vector<ir::Var> s1;         // register-tile loops of the mid tile (S2), outermost first
  std::vector<int64_t> s1_trips;   // their trip counts
  std::vector<ir::Var> rows;       // unrolled non-vector register coordinates
  std::vector<int64_t> row_trips;  // their extents
  ir::Var vector_unroll;           // vector index in the register tile (may be undefined)
  int64_t vector_unrolls = 1;
  ir::Var lane;  // lane variable (may be undefined)
  ir::Var step;  // innermost reduce variable
  int64_t steps = 1;
};

// Prefetch statements for a group of reduce steps starting at `loops.step`, for a register tile
// whose body reads `value` (accesses lowered to loads); `line_elems` elements share a cache line.
// Empty when no operand changes between register tiles.
std::vector<loop::Stmt> next_tile_prefetches(const ir::Expr& value, const TileLoops& loops,
                                             int64_t line_elems);

}  // namespace tessera::schedule
