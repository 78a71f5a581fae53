#pragma once
// One call of a size-generic kernel with torch tensors, in C++ (kernel_build.KernelCall's fast
// path): a range plan's kernels are called from Python one by one, and the Python steps of a
// call (contiguity, the packed weight's version, output allocation, pointers) cost several
// microseconds each; here they are one C++ call.
//
// Invariants: a call runs only when every packed weight's copy is current (PackedWeight), else
// it declines (returns nothing) and the caller's Python path packs the weight again; inputs that
// are not contiguous are made contiguous first, as the Python path does; outputs are fresh
// contiguous tensors of the kernel's output shapes at the call's sizes.
#include <ATen/core/Tensor.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "python/packed_weight.h"

namespace tessera::python {

// A kernel as the fast call runs it: checked runs (buffer and size counts, size ranges) and its
// output shapes at given sizes.
struct KernelRunner {
  std::function<void(const std::vector<void*>& buffers, const std::vector<int64_t>& sizes)> run;
  std::function<std::vector<std::vector<int64_t>>(const std::vector<int64_t>& sizes)> output_shapes;
};

class KernelCall {
 public:
  // packed[i]: the copy input i is read through, or null (the input itself); dtypes: one per
  // output.
  KernelCall(KernelRunner runner, std::vector<std::shared_ptr<const PackedWeight>> packed,
             std::vector<c10::ScalarType> dtypes);

  // The outputs, or nullopt where a packed weight is not current (nothing has run).
  std::optional<std::vector<at::Tensor>> call(const std::vector<at::Tensor>& inputs,
                                              const std::vector<int64_t>& sizes) const;

  size_t num_inputs() const { return packed_.size(); }
  size_t num_outputs() const { return dtypes_.size(); }
  // Calls that ran, and calls declined for a packed weight that was not current.
  size_t calls() const { return calls_; }
  size_t declined() const { return declined_; }

 private:
  KernelRunner runner_;
  std::vector<std::shared_ptr<const PackedWeight>> packed_;
  std::vector<c10::ScalarType> dtypes_;
  mutable std::atomic<size_t> calls_{0}, declined_{0};
};

}  // namespace tessera::python
