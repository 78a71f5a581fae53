#pragma once
// A fixed machine for tuner tests: nothing is probed, so results do not depend on the host.
// 2 GHz (128 GFLOP/s per core with 16 lanes and 2 FMA ports), 2 cores, 32 KiB L1, 1 MiB L2
// unless `l2_bytes` says otherwise, and no LLC unless `llc_bytes` gives one (at 3x DRAM's rate).
#include <cstdint>

#include "cost/memory_levels.h"
#include "schedule/default_schedule.h"

namespace tessera::testing {

inline cost::MemoryHierarchy synthetic_hw(int64_t l2_bytes = 1 << 20, int64_t llc_bytes = 0) {
  cost::MemoryHierarchy h;
  h.cores = 2;
  h.vector_lanes = 16;
  h.num_vector_registers = 32;
  h.fp32_gflops_core = 128;
  h.dram_bw_all_gbs = 20;
  h.levels = {{"dram", 0, 64, 10.0, 100.0},
              {"llc", llc_bytes, 64, 30.0, 20.0},
              {"l2", l2_bytes, 64, 100.0, 5.0},
              {"l1", 32 << 10, 64, 200.0, 1.0},
              {"reg", 2048, 64, 1000.0, 0.5}};
  return h;
}

// The schedule rules' view of the same machine: 16 lanes, 32 vector registers, 2 threads.
inline schedule::Target synthetic_target() {
  schedule::Target t;
  t.vector_lanes = 16;
  t.num_vector_registers = 32;
  t.num_threads = 2;
  return t;
}

}  // namespace tessera::testing
