#pragma once
// The packed copy of one weight, shared between Python's kernel_build.PackedInput (which makes
// it, and makes it again when the weight changes) and C++ callers that must not enter Python to
// use it (a graph operator's C++ kernel, graph_kernel.h).
//
// Invariant: `packed` was made from the tensor whose data pointer is `source_ptr` at version
// `version` of its version counter; `source` holds that tensor's storage, so its address cannot
// be reused by another tensor while the copy is kept, and the copy lives as long as this object.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <mutex>
#include <optional>

namespace tessera::python {

class PackedWeight {
 public:
  // Records a copy made (or remade) from `source`, at `version` (nullopt: an inference tensor,
  // which has no version counter; such a copy is never current).
  void set(at::Tensor packed, const at::Tensor& source, std::optional<int64_t> version);

  // The copy's data pointer when it was made from `weight` as it is now (same address, same
  // version), else nullopt: the caller must have it packed again (through Python).
  std::optional<void*> current(const at::Tensor& weight) const;

 private:
  mutable std::mutex mutex_;
  at::Tensor packed_;
  c10::Storage source_;
  const void* source_ptr_ = nullptr;
  std::optional<int64_t> version_;
};

}  // namespace tessera::python
