#pragma once
// Transposing register tiles. A copy whose vector lanes gather from rows that the enclosing
// unrolled loop walks with unit stride (a row-major [n, k] written as [k, n]) --
//
//   unrolled for u in [0, L):
//     vectorized for v in [0, L):
//       out[f + v] = g(in[h + u])        (h: lane stride != 1 in v; f, h: stride 1 in u)
//
// -- loads each of L input lines L times, one lane at a time. It becomes an L x L register
// tile written row by row with vector loads, then read back column by column:
//
//   allocate tile: [L * L] (register)
//   unrolled for v in [0, L): vectorized for u in [0, L): tile[v * L + u] = g(in[h + u])
//   unrolled for u in [0, L): vectorized for v in [0, L): out[f + v] = tile[v * L + u]
//
// The CPU code generator emits the column reads as one transpose of the tile's rows (L log2 L
// two-input shuffles, codegen/llvm/emit_memory.cc). `g` is the load itself or a select of it
// against a constant under a condition free of u (the rows' bounds); L is a power of two, at
// least 4, the vectorized loop's extent. Anything else is left as it is.
#include "loop/stmt.h"

namespace tessera::loop {

Stmt transpose_register_tiles(const Stmt& s);

}  // namespace tessera::loop
