#pragma once
// Analytic time model of the tiled GPU schedule (schedule/gpu/tiled_reduction.h) for Gensor's
// construction on GPU: capacity limits (threads per block, shared memory, registers) and a
// predicted time, the largest of
//   compute:  flops / (fp32 peak x wave efficiency x latency hiding x lanes in use x
//             register-tile ILP)
//   global:   bytes staged per block and step x blocks x steps, + output writes
//             / DRAM bandwidth
//   shared:   words each thread reads from shared memory per reduce value x bank-conflict degree
//             (Gensor's Eq. 3: threads along threadIdx's fastest axis read words `inner` apart,
//             so a warp's reads fall on gcd(inner, 32) times fewer banks; vthreads keep them one
//             apart) / shared-memory throughput.
// Waves over SMs come from the blocks per SM that threads, shared memory and registers allow.
#include <cstdint>
#include <string>
#include <vector>

#include "cost/gpu_hardware.h"
#include "schedule/gpu/tiled_reduction.h"
#include "schedule/stage_plan.h"

namespace tessera::tune::gensor {

// What the model needs of a tiled-reduction plan, extracted once.
struct GpuTileSpace {
  const schedule::StagePlan* plan = nullptr;
  std::vector<int64_t> extents;         // spatial axes (constant; symbolic counts as 1024)
  std::vector<int64_t> reduce_extents;  // reduce axes
  // Per distinct operand access: which spatial axes its indices use.
  std::vector<std::vector<bool>> operand_axes;
};
GpuTileSpace make_gpu_tile_space(const schedule::StagePlan& plan);

struct GpuPrediction {
  bool feasible = false;
  std::string why_infeasible;
  double time_s = 0;
  double compute_s = 0, global_s = 0, shared_s = 0;
  int64_t blocks = 0, threads = 0, registers = 0, shared_bytes = 0, blocks_per_sm = 0;
  double wave_efficiency = 0;
  int64_t bank_conflict = 1;  // worst degree over the operands
};

// Registers per thread the model assumes beyond accumulators and operand fragments (indices,
// addresses, loop counters), fitted to nvcc's counts for the default GEMM schedule.
constexpr int64_t kRegisterOverhead = 32;
// Resident warps per SM that hide memory and pipeline latency in the model.
constexpr int64_t kWarpsToHideLatency = 16;
// Independent accumulators a thread needs to keep the FMA pipeline full.
constexpr int64_t kMinIndependentFma = 4;

GpuPrediction predict_gpu_tiles(const GpuTileSpace& sp, const schedule::gpu::GpuTileConfig& c,
                                const cost::GpuHardware& hw);

}  // namespace tessera::tune::gensor
