#pragma once
// GPU schedule for injective (elementwise, broadcast, reshape-like) kernels: one thread per
// output element.
//
// Every output is walked as a flat row-major range [0, numel); the flat position of a thread is
// blockIdx.x * kInjectiveBlockSize + threadIdx.x, and threads past the end of an output's range
// do nothing (the tail guard). All outputs share one launch grid, sized for the largest output,
// so a kernel is one launch whatever its number of outputs.
#include <cstdint>
#include <string>

#include "loop/stmt.h"
#include "schedule/stage_plan.h"

namespace tessera::schedule::gpu {

// Threads per block (threadIdx.x extent): a multiple of the 32-thread warp that fills an SM with
// a few resident blocks on every CUDA architecture.
constexpr int64_t kInjectiveBlockSize = 256;

// Lowers `plan` (whose stages must all be reduction-free and epilogue-free) into a kernel whose
// body is `for bx (blockIdx.x) { for tx (threadIdx.x) { per output: if (i < numel) store } }`.
// Kernel ABI as schedule::lower: buffers = plan.inputs then plan.outputs, then the size
// variables of the DAG. No output is read back from another output's buffer: each recomputes
// the injective producers it reads (blocks run in no fixed order, so a value written by another
// block is not safe to read within one launch). The loop-IR passes (loop/pipeline.h) run on the
// result. Throws tessera::Error for a reduction or an epilogue stage.
loop::LoweredFunc lower_injective(const StagePlan& plan, const std::string& name);

}  // namespace tessera::schedule::gpu
