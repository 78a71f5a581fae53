#pragma once
// The key under which the tuning database files a workload: one kernel to compile for one target.
//
//   hash       ir::structural_hash of the output DAG (insensitive to renaming and summation order)
//   shapes     dtypes and shapes of the inputs and outputs, symbolic sizes with their ranges
//   target     where the kernel runs, e.g. "cpu:avx512:threads=2" (a schedule tuned for 2 threads
//              is not the best one for 16)
//   canonical  the canonical text of the DAG (canonical_text.h); equal hashes are confirmed by it
//
// A key also remembers how the workload it was made from names its tensors, so that a stored
// schedule (which names ops and packed inputs) can be translated to and from canonical names:
// a record tuned for one model serves an identical operator in another model under other names.
#include <cstdint>
#include <string>
#include <vector>

#include "ir/tensor.h"

namespace tessera::db {

struct WorkloadKey {
  uint64_t hash = 0;
  std::string shapes;
  std::string target;
  std::string canonical;

  // Not part of the key's identity: canonical tensor id -> this workload's tensor name, and
  // canonical id -> (canonical summation position -> index into that op's reduce_axes).
  std::vector<std::string> tensor_names;
  std::vector<std::vector<int>> reduce_order;

  std::string hash_hex() const;  // 16 lowercase hex digits (how the database stores the hash)
  // Same workload on the same target (all four key fields equal).
  bool same_workload(const WorkloadKey& other) const;
};

// `inputs` in the kernel's argument order. An empty `target` means host_target().
WorkloadKey make_workload_key(const std::vector<ir::Tensor>& outputs,
                              const std::vector<ir::Tensor>& inputs,
                              const std::string& target = "");

// The target string of this process: "cpu:<isa>:threads=<n>" with the ISA the JIT generates code
// for (avx512 | avx2 | sse) and the size of Tessera's thread pool.
std::string host_target();

uint64_t parse_hash_hex(const std::string& hex);  // inverse of hash_hex (0 on malformed input)

}  // namespace tessera::db
