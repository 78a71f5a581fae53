#pragma once
// One verification case without a GPU: a kernel's GPU program (its launches in turn, over shared
// buffers: schedule/gpu/gpu_program.h) run by the GPU-semantics interpreter on random inputs
// (races and out-of-bounds accesses counted), its outputs compared with the reference
// interpreter.
#include <cstdint>
#include <string>
#include <vector>

#include "ir/tensor.h"

namespace tessera::runtime::cuda {

struct InterpreterCase {
  std::string name;
  std::string schedule;  // GpuProgram::schedule(): "tiled", "tiled+row", ...
  int64_t races = 0;
  int64_t out_of_bounds = 0;
  int64_t uninitialized_reads = 0;  // of shared memory
  bool matches = false;             // every output allclose to the reference
  std::string message;  // why it failed (first finding or mismatch), empty when it passed

  bool passed() const {
    return matches && races == 0 && out_of_bounds == 0 && uninitialized_reads == 0;
  }
};

// Shapes must be constant. Tolerances: relative `rtol`, absolute `atol` (allclose). A lowering
// or interpreter error is a failed case with its message, not an exception.
InterpreterCase check_gpu_schedule(const std::vector<ir::Tensor>& outputs,
                                   const std::vector<ir::Tensor>& inputs, const std::string& name,
                                   uint64_t seed = 1, double rtol = 1e-4, double atol = 1e-5);

}  // namespace tessera::runtime::cuda
