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
void interpret(const LoweredFunc& f, const std::vector<void*>& buffers,
               const std::vector<int64_t>& sizes);

}  // namespace tessera::loop
