#pragma once
// CUDA C source -> cubin for one GPU architecture, with NVRTC when it loads (nvrtc_api.h), else
// with `nvcc -cubin` (compile only: no device or driver needed). Results are cached in memory by
// a hash of the source, the architecture and the compiler, so a kernel compiles once per process.
#include <cstdint>
#include <string>

#include "runtime/cuda/ptxas_info.h"

namespace tessera::runtime::cuda {

// The architecture of the lent GPUs (H100 / H200), the default target.
constexpr const char* kDefaultCudaArch = "sm_90";

enum class CudaCompiler { kNone, kNvrtc, kNvcc };
const char* cuda_compiler_name(CudaCompiler c);  // "none", "nvrtc", "nvcc"

// Which compiler compile_cuda uses here: NVRTC when it loads, else nvcc when one is found
// (TESSERA_NVCC, the nvcc the build found, or one on PATH), else none.
CudaCompiler available_cuda_compiler();
// The nvcc compile_cuda would run, or "" when there is none.
std::string find_nvcc();

struct CompiledCuda {
  std::string cubin;  // the ELF image cuModuleLoadData takes
  std::string log;    // compiler messages, ptxas's -v lines included
  PtxasInfo ptxas;    // parsed from log
  CudaCompiler compiler = CudaCompiler::kNone;
  uint64_t source_hash = 0;
  bool from_cache = false;
};

struct CudaCompileOptions {
  std::string arch = kDefaultCudaArch;  // "sm_90"
  // Use this compiler rather than the first available one (tests of each path).
  CudaCompiler force = CudaCompiler::kNone;
  bool use_cache = true;
};

// Compiles `source` (a self-contained translation unit, as emit_cuda produces). Throws
// tessera::Error with the compiler's log when it fails, and when no compiler is available.
CompiledCuda compile_cuda(const std::string& source, const CudaCompileOptions& options = {});

// Stable 64-bit hash of a compile's inputs (FNV-1a): the cache key.
uint64_t cuda_source_hash(const std::string& source, const std::string& arch,
                          CudaCompiler compiler);

// Compiles counted since the process started, and how many came from the cache.
struct CudaCompileCounts {
  int64_t compiles = 0;
  int64_t cache_hits = 0;
};
CudaCompileCounts cuda_compile_counts();

}  // namespace tessera::runtime::cuda
