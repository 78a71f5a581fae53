#pragma once
// A kernel's DAG as a sequence of GPU launches. On the CPU one loop nest runs every stage of a
// plan; a GPU kernel is one schedule (injective, row or tiled), and some plans need two: a conv
// whose output is max-pooled, a matmul whose output is layer-normalised. Such a plan's stages are
// grouped greedily into the longest runs one GPU schedule covers; each run is a launch of its
// own, and the values passed between runs live in temporaries (device buffers the caller
// allocates, as the CPU kernel's temporaries are). A plan one schedule covers is one launch.
#include <string>
#include <vector>

#include "ir/tensor.h"
#include "loop/stmt.h"

namespace tessera::schedule::gpu {

struct GpuLaunch {
  loop::LoweredFunc func;
  std::string schedule;  // gpu_schedule_name of its plan
  // func's buffers in its ABI order (its inputs, then its outputs) as indices into
  // GpuProgram::buffers().
  std::vector<int> buffers;
};

struct GpuProgram {
  std::vector<ir::Tensor> inputs;       // the program's, in ABI order
  std::vector<ir::Tensor> outputs;      // the program's, in ABI order
  std::vector<ir::Tensor> temporaries;  // written by one launch, read by a later one
  std::vector<GpuLaunch> launches;      // in execution order

  // inputs, outputs, then temporaries: what GpuLaunch::buffers index.
  std::vector<ir::Tensor> buffers() const;
  // "tiled" for one launch, "tiled+row" for two, ...
  std::string schedule() const;
};

// Throws tessera::Error when some stage has no GPU schedule even alone.
GpuProgram lower_gpu_program(const std::vector<ir::Tensor>& outputs,
                             const std::vector<ir::Tensor>& inputs, const std::string& name);

}  // namespace tessera::schedule::gpu
