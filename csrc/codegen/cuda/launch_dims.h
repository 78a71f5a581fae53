#pragma once
// The launch configuration a GPU loop nest asks for: the extent of each GPU-bound loop kind.
#include <array>

#include "loop/stmt.h"

namespace tessera::codegen::cuda {

struct LaunchDims {
  // grid[d] / block[d]: extents of the kGpuBlock{X,Y,Z} / kGpuThread{X,Y,Z} loops, in terms of
  // the kernel's size variables; int_imm(1) for a dimension no loop binds. An extent may be 0
  // (an empty output): CUDA rejects such a launch, so the launcher skips it.
  std::array<ir::Expr, 3> grid;
  std::array<ir::Expr, 3> block;
};

// Collects the launch dimensions of `f`. Every loop bound to one hardware index must have the
// same extent (a launch has one grid and one block shape), a min of 0, and must not be nested in
// another loop bound to the same index; extents may only read size variables (they are
// evaluated on the host before the launch). Throws tessera::Error otherwise.
LaunchDims launch_dims(const loop::LoweredFunc& f);

}  // namespace tessera::codegen::cuda
