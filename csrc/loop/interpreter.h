#pragma once
// A slow, obviously-correct executor of loop IR: every loop runs serially, every expression is
// evaluated by ir::evaluate. It checks lowering independently of the code generators (a wrong
// kernel can then be blamed on the schedule or on codegen, not both).
#include <cstdint>
#include <vector>

#include "loop/race_check.h"
#include "loop/stmt.h"

namespace tessera::loop {

// Runs `f` on host buffers (ABI order, element types as declared) with the given size values.
// Out-of-bounds accesses throw tessera::Error (buffer extents are evaluated from their shapes).
// GPU-bound loops run serially like the others: the kernel's result as long as its threads do not
// communicate; a barrier throws.
void interpret(const LoweredFunc& f, const std::vector<void*>& buffers,
               const std::vector<int64_t>& sizes);

// Same, with GPU semantics, checked: blocks run one after another; the iterations of a
// thread-bound loop (the threads of a block) run phase by phase between barriers (in a phase,
// each thread in index order runs until it reaches a barrier or its end) and share the block's
// kShared allocations. At most one thread-bound loop may be open at a time (a 1-D block), with
// at most 1024 threads. Accesses made inside a thread loop are checked for data races
// (race_check.h), and accesses outside their buffer are counted and skipped (reads give 0);
// both are returned rather than thrown. Throws tessera::Error when the threads of a block pass
// different numbers of barriers (on a GPU: undefined behaviour, often a hang).
GpuCheckReport interpret_gpu(const LoweredFunc& f, const std::vector<void*>& buffers,
                             const std::vector<int64_t>& sizes);

}  // namespace tessera::loop
