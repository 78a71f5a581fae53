#include "db/workload_key.h"

#include <cstdio>
#include <cstdlib>

#include "codegen/llvm/host_cpu.h"
#include "db/canonical_text.h"
#include "ir/structural_hash.h"
#include "runtime/parallel.h"

namespace tessera::db {

std::string WorkloadKey::hash_hex() const {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(hash));
  return buf;
}

bool WorkloadKey::same_workload(const WorkloadKey& other) const {
  return hash == other.hash && shapes == other.shapes && target == other.target &&
         canonical == other.canonical;
}

uint64_t parse_hash_hex(const std::string& hex) {
  if (hex.empty() || hex.size() > 16) return 0;
  char* end = nullptr;
  unsigned long long v = std::strtoull(hex.c_str(), &end, 16);
  return (end && *end == '\0') ? static_cast<uint64_t>(v) : 0;
}

std::string host_target() {
  const codegen::HostCpu& cpu = codegen::host_cpu();
  // The ISA the code generator actually uses, not the CPU model: records transfer between
  // machines with the same vector width, and a model name LLVM misreports would split them.
  const char* isa = cpu.has_avx512 ? "avx512" : cpu.has_avx2 ? "avx2" : "sse";
  return std::string("cpu:") + isa + ":threads=" + std::to_string(runtime::get_num_threads());
}

WorkloadKey make_workload_key(const std::vector<ir::Tensor>& outputs,
                              const std::vector<ir::Tensor>& inputs, const std::string& target) {
  CanonicalForm form = canonicalize(outputs, inputs);
  WorkloadKey key;
  key.hash = ir::structural_hash(outputs);
  key.shapes = std::move(form.shapes);
  key.target = target.empty() ? host_target() : target;
  key.canonical = std::move(form.text);
  for (const ir::Tensor& t : form.tensors) key.tensor_names.push_back(t->name);
  key.reduce_order = std::move(form.reduce_order);
  return key;
}

}  // namespace tessera::db
