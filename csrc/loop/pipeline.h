#pragma once
// The loop-IR passes, in order. Lowering (schedule/lower.h) builds the loop nests of a kernel and
// hands them to run_loop_passes; compile_cpu runs prepare_for_cpu on a function that has not
// been through it (loop IR written by hand).
//
// With the environment variable TESSERA_DUMP=lower, the function is printed to stderr after each
// pass, under a header "== loop IR after <pass>".
#include "loop/stmt.h"

namespace tessera::loop {

// simplify_stmt, guard_integer_division, then prepare_for_cpu.
LoweredFunc run_loop_passes(LoweredFunc f);

// legalize_vectorized_loops, unroll_loops, outline_parallel_loops: the form the CPU code
// generator translates as it stands. Sets f.cpu_ready.
LoweredFunc prepare_for_cpu(LoweredFunc f);

}  // namespace tessera::loop
