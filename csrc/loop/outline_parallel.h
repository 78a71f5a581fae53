#pragma once
// Parallel outlining: the body of every outermost kParallel loop moves into
// LoweredFunc::outlined, with its captures (the buffers and variables it reads from the
// enclosing function, in first-use order), and the loop becomes a kParallelCall of it. A
// kParallel loop inside another one runs serially (the pool does not nest): it becomes a kSerial
// loop, with a note.
#include "loop/stmt.h"

namespace tessera::loop {

LoweredFunc outline_parallel_loops(LoweredFunc f);

}  // namespace tessera::loop
