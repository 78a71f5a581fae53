#pragma once
// CUDA C source for a loop-IR kernel.
//
// The kernel is `extern "C" __global__ void <name>(<T>* buffer..., long long size...)`: one
// pointer per LoweredFunc::args (ABI order; bool elements are bytes) then one 64-bit integer per
// size variable. It must be launched with the grid and block of launch_dims(f): GPU-bound loops
// become reads of blockIdx / threadIdx, so the body runs once per (block, thread). The source
// is self-contained (no #include), for NVRTC as for nvcc.
#include <string>

#include "loop/stmt.h"

namespace tessera::codegen::cuda {

// Throws tessera::Error on what has no CUDA translation here: tensor accesses, kParallel loops
// and parallel calls (CPU thread-pool constructs), heap and global allocations, non-constant
// local or shared allocations, fp16/bf16 elements, GPU loops launch_dims rejects, and kernels
// already prepared for the CPU (prepare_for_cpu).
std::string emit_cuda(const loop::LoweredFunc& f);

}  // namespace tessera::codegen::cuda
