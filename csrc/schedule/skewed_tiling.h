#pragma once
// Skewed register tiles for band products, such as EinNet's G2BMM once its dilated read is
// separated:
//   O[.., s, .., v] = sum_k A[.., s, .., k] * L[.., k, s + v + c]
// A plain register tile of R rows along s and lanes along v loads each L vector once per row:
// row s + 1 reads the window of row s shifted by one lane. The skewed tile computes R rows from
// s0 over the window n = (s - s0) + v in [0, R - 1 + extent(v)): a read indexed by s + v is then
// L[.., s0 + n + c] for every row, one vector load feeding R FMAs, as in a GEMM's register tile.
// Row r's band is the lanes n in [r, r + extent(v)); the write-back stores those (masked at both
// ends) and drops the rest, the triangles that the window adds.
//
//   parallel for cache tiles (the axes other than v, tile_outer)          S0
//     for register tiles in the cache tile (tile_reg, s1_order without v)  S2
//       for window columns (tile_reg[v] lanes each; a partial last one masked)
//         accumulators = identity
//         for the whole reduction (the innermost unrolled by reduce_unroll)
//           rows unrolled, vectors unrolled, lanes vectorised: acc += value at v = n - r
//         the band's lanes of each row written (epilogue applied)
// A register tile cut by the end of an axis runs the same nest with its rows guarded and the
// window bounded by the rows it has, inner steps not unrolled.
#include "loop/stmt.h"
#include "schedule/annotation.h"
#include "schedule/lower_access.h"
#include "schedule/lower_stage.h"

namespace tessera::schedule {

// Whether `op` (per-point value `value`, producers inlined) may lower with `ann`'s skewed tile:
// multi-level tiling with a vector axis v and a skew axis s != v; constant extents; a reduction
// short enough to run whole (no chunked float sum); every read that mentions v mentions it in
// one index only, as s + v + (terms free of both), and s nowhere else; no such read under a
// select whose condition is not a function of s + v (another guard need not hold at the
// window's extra points); register tiles dividing the cache tiles of the axes other than v.
bool skewed_tiling_applies(const ir::ComputeOpNode& op, const ir::Expr& value, ir::DType dtype,
                           const StageAnnotation& ann);

// A skew axis for `op` vectorised along `vector_axis`: the innermost spatial axis (extent >= 2)
// with which skewed_tiling_applies and some read indexed by s + v exists; -1 when none.
int find_skew_axis(const ir::ComputeOpNode& op, const ir::Expr& value, ir::DType dtype,
                   int vector_axis);

// The stage's loops under the skewed tile (requires skewed_tiling_applies).
loop::Stmt lower_skewed_tiling(const StageBody& sb, const StageAnnotation& ann,
                               const AccessLowering& al);

}  // namespace tessera::schedule
