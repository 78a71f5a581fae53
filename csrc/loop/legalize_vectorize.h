#pragma once
// Vectorisation legalisation: every kVectorized loop that survives may be executed lane-wise in
// SIMD registers, so the code generator translates each one without asking.
//
// A kVectorized loop stays vectorized when its extent is a constant in [2, kMaxVectorLanes] and
// its body gives the same result lane-wise as running its iterations in order. Allowed in the
// body: stores, prefetches, lets, ifs, sequences and constant-extent kUnrolled loops (up to
// kMaxFullUnroll) whose min does not depend on the lane. For each buffer that is written, no lane
// may touch an element another lane writes: either every access uses the same index with a
// non-zero constant lane stride, or (unrolled copies) all accesses share one constant stride and
// their bases differ by constants that keep lanes apart, or the buffer is written by a single
// store and never read (scatter order then matches iteration order).
//
// Any other kVectorized loop becomes a kSerial loop (still correct), with a note saying why.
#include <cstdint>
#include <string>
#include <vector>

#include "loop/stmt.h"

namespace tessera::loop {

// Widest SIMD body the code generator emits.
constexpr int64_t kMaxVectorLanes = 256;

Stmt legalize_vectorized_loops(const Stmt& s, std::vector<std::string>* notes);

}  // namespace tessera::loop
