#pragma once
// What the JIT targets: the CPU this process runs on.
//
// LLVM 14 may not know the exact model of newer CPUs (a Sapphire Rapids VM reports as
// "icelake-client"), so the feature list, not the name, decides what code is generated.
#include <string>

namespace tessera::codegen {

struct HostCpu {
  std::string name;       // LLVM CPU name (scheduling model)
  std::string features;   // every host feature as "+f" or "-f", comma separated (LLVM syntax)
  std::string triple;     // LLVM target triple of the process
  int vector_bits = 128;  // 512 with avx512f, 256 with avx2, 128 otherwise
  bool has_avx512 = false;
  bool has_avx2 = false;
  bool has_fma = false;
  bool has_avx512_bf16 = false;
  bool has_f16c = false;
};

// Detected once (thread-safe) and cached for the life of the process.
const HostCpu& host_cpu();

}  // namespace tessera::codegen
