#pragma once
// Unrolling: a kUnrolled loop with a constant extent of at most kMaxFullUnroll becomes its body
// written out once per iteration, in order, with the loop variable replaced by min + i. With a
// constant min every copy then indexes with constants, which is what lets register tiles live in
// registers. Other kUnrolled loops (extent not constant, or above the limit) become kSerial loops,
// with a note. Afterwards no kUnrolled loop is left.
//
// The copies share the nodes of everything that does not mention an unrolled variable, and
// within one copy every shared subexpression stays shared, so the code generator's per-statement
// memo and value numbering see the same DAG as in the loop.
#include <cstdint>
#include <string>
#include <vector>

#include "loop/stmt.h"

namespace tessera::loop {

// Largest extent unrolled; longer kUnrolled loops stay loops.
constexpr int64_t kMaxFullUnroll = 512;

Stmt unroll_loops(const Stmt& s, std::vector<std::string>* notes);

}  // namespace tessera::loop
