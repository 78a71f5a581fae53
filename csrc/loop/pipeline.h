#pragma once
// The loop-IR passes, in order. Lowering (schedule/lower.h) builds the loop nests of a kernel and
// hands them to run_loop_passes, whose result is target-independent (what the tuners' features
// and the interpreter read, and what Kernel.loop_ir shows); the CPU code generator
// (compile_cpu) runs prepare_for_cpu on it before translating.
//
// With the environment variable TESSERA_DUMP=lower, the function is printed to stderr after each
// pass, under a header "== loop IR after <pass>".
#include "loop/stmt.h"

namespace tessera::loop {

// simplify_stmt, then guard_integer_division.
LoweredFunc run_loop_passes(LoweredFunc f);

// transpose_register_tiles, legalize_vectorized_loops, unroll_loops, outline_parallel_loops:
// the form the CPU code generator translates as it stands. Sets f.cpu_ready.
LoweredFunc prepare_for_cpu(LoweredFunc f);

}  // namespace tessera::loop
