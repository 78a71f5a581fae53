#pragma once
// A slow, obviously-correct executor of loop IR: every loop runs serially, every expression is
// evaluated by ir::evaluate. It checks lowering independently of the code generators (a wrong
// kernel can then be blamed on the schedule or on codegen, not both).
#include <cstdint>
#include <vector>

#include "loop/stmt.h"

namespace tessera::loop {

// Runs `f` on host buffers (ABI order, element types as declared) with the given size values.
// Out-of-bounds accesses throw tessera::Error (buffer extents are evaluated from their shapes).
// GPU-bound loops run serially like the others: the kernel's result as long as its threads do not
// communicate; a barrier throws.
void interpret(const LoweredFunc& f, const std::vector<void*>& buffers,
               const std::vector<int64_t>& sizes);

// Same, with GPU semantics: blocks run one after another, and the iterations of a thread-bound
// loop (the threads of a block) run concurrently, one OS thread each, meeting at barriers and
// sharing the block's kShared allocations. At most one thread-bound loop may be open at a time
// (a 1-D block) with at most 1024 threads. Throws tessera::Error when the threads of a block pass
// different numbers of barriers (on a GPU: undefined behaviour, often a hang).
void interpret_gpu(const LoweredFunc& f, const std::vector<void*>& buffers,
                   const std::vector<int64_t>& sizes);

}  // namespace tessera::loop
