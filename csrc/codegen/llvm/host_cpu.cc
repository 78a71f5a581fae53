#include "codegen/llvm/host_cpu.h"

#include <llvm/ADT/StringMap.h>
#include <llvm/Support/Host.h>

#include <algorithm>
#include <vector>

namespace tessera::codegen {

namespace {

HostCpu detect() {
  HostCpu cpu;
  cpu.name = llvm::sys::getHostCPUName().str();
  cpu.triple = llvm::sys::getProcessTriple();
  llvm::StringMap<bool> features;
  std::vector<std::string> parts;
  if (llvm::sys::getHostCPUFeatures(features)) {
    for (const auto& kv : features) {
      parts.push_back((kv.second ? "+" : "-") + kv.first().str());
    }
  }
  // Sorted so that the string (part of kernel cache keys elsewhere) is stable across runs.
  std::sort(parts.begin(), parts.end());
  for (const std::string& p : parts) {
    if (!cpu.features.empty()) cpu.features += ",";
    cpu.features += p;
  }
  auto has = [&](const char* f) {
    auto it = features.find(f);
    return it != features.end() && it->second;
  };
  cpu.has_avx512 = has("avx512f");
  cpu.has_avx2 = has("avx2");
  cpu.has_fma = has("fma");
  cpu.has_avx512_bf16 = has("avx512bf16");
  cpu.has_f16c = has("f16c");
  cpu.vector_bits = cpu.has_avx512 ? 512 : (cpu.has_avx2 ? 256 : 128);
  // An unknown model comes back as "generic", whose scheduling model is poor for wide vectors;
  // pick a close relative that LLVM 14 knows (features are still taken from the host).
  bool x86 = cpu.triple.rfind("x86_64", 0) == 0;
  if (x86 && (cpu.name.empty() || cpu.name == "generic")) {
    cpu.name = cpu.has_avx512 ? "skylake-avx512" : (cpu.has_avx2 ? "haswell" : "x86-64");
  }
  return cpu;
}

}  // namespace

const HostCpu& host_cpu() {
  static const HostCpu cpu = detect();
  return cpu;
}

}  // namespace tessera::codegen
