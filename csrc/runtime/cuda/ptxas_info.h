#pragma once
// What ptxas says about a compiled kernel (`nvcc -Xptxas -v`, or NVRTC's log with
// --ptxas-options=-v): registers per thread, spills, shared memory.
#include <cstdint>
#include <string>

namespace tessera::runtime::cuda {

struct PtxasInfo {
  bool found = false;  // the log had a "Used N registers" line
  int64_t registers = 0;
  int64_t spill_store_bytes = 0;
  int64_t spill_load_bytes = 0;
  int64_t stack_bytes = 0;
  int64_t shared_bytes = 0;

  int64_t spill_bytes() const { return spill_store_bytes + spill_load_bytes; }
};

// Parses the ptxas lines of `log`. With several kernels in one log, registers and shared memory
// are the largest of any kernel and spills their sum.
PtxasInfo parse_ptxas_info(const std::string& log);

}  // namespace tessera::runtime::cuda
