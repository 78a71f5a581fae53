#pragma once
// Integer division by zero is an error, as in eager PyTorch: a kernel whose integer `//` or `%`
// has a divisor not provably non-zero (data, or an iterator that can be 0) gets a status word,
// set when such a divisor is 0, and its Kernel raises after the run. The generated division
// itself never traps (codegen divides by 1 where the divisor is 0).
#include "loop/stmt.h"

namespace tessera::loop {

// Adds the status argument (LoweredFunc::kStatusArg) and the checks before every statement that
// evaluates such a division. Functions without one are returned unchanged.
LoweredFunc guard_integer_division(LoweredFunc f);

}  // namespace tessera::loop
