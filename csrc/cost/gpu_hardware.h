#pragma once
// Description of a CUDA GPU for GPU schedules and their cost model: the capacity limits a
// configuration must respect (threads, shared memory, registers) and the throughputs the model
// divides by. A shipped H100 description serves construct runs where there is no device
// (predict-only); on a device the limits are read from the driver.
#include <cstdint>
#include <string>

#include "util/json.h"

namespace tessera::cost {

struct GpuHardware {
  std::string name;
  std::string arch;  // "sm_90"
  int sms = 0;       // streaming multiprocessors
  int warp_size = 32;
  int shared_banks = 32;  // 4-byte banks of shared memory
  int64_t max_threads_per_block = 1024;
  int64_t max_threads_per_sm = 2048;
  int64_t max_blocks_per_sm = 32;
  int64_t shared_bytes_per_block = 48 * 1024;  // static __shared__ without opting in to more
  int64_t shared_bytes_per_sm = 0;
  int64_t registers_per_sm = 65536;
  int64_t max_registers_per_thread = 255;
  double clock_hz = 0;                // SM clock
  double fp32_flops = 0;              // peak fp32 FMA throughput, 2 flops per FMA
  double dram_bytes_per_s = 0;        // global memory bandwidth
  double shared_bytes_per_clk = 128;  // per SM: 32 banks x 4 bytes
};

// NVIDIA H100 SXM5 (132 SMs, 1.98 GHz boost, HBM3 3.35 TB/s): the lent machines' GPU.
GpuHardware h100_sxm();

// The description of device `ordinal` read through the driver API, with the throughputs of
// h100_sxm() scaled by SM count and clock; throws tessera::Error without a device.
GpuHardware probe_gpu_hardware(int ordinal = 0);

util::Json gpu_hardware_to_json(const GpuHardware& hw);

}  // namespace tessera::cost
