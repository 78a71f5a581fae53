#pragma once
// Does a CPU-ready function (loop/pipeline.h: prepare_for_cpu) still have scalar innermost
// loops? Serial loops that store, with no loop inside and outside any vectorized loop: code the
// schedule left scalar (no vector axis, pooling windows), which LLVM's loop vectoriser can still
// vectorise. Functions without them are vectorised and unrolled already, and the code generator
// skips LLVM's loop passes for them (codegen/llvm/compile.cc).
#include "loop/stmt.h"

namespace tessera::loop {

bool has_scalar_inner_loops(const LoweredFunc& f);

// Does `s` hold a vectorized loop? Such code is in its final shape: the code generator keeps
// LLVM's unroller and vectorisers off the loops around it.
bool contains_vectorized_loop(const Stmt& s);

}  // namespace tessera::loop
