#include "python/kernel_call.h"

#include <ATen/ops/empty.h>

#include <utility>

#include "util/check.h"

namespace tessera::python {

KernelCall::KernelCall(KernelRunner runner, std::vector<std::shared_ptr<const PackedWeight>> packed,
                       std::vector<c10::ScalarType> dtypes)
    : runner_(std::move(runner)), packed_(std::move(packed)), dtypes_(std::move(dtypes)) {
  TESSERA_CHECK(runner_.run && runner_.output_shapes) << "kernel call without a kernel";
}

std::optional<std::vector<at::Tensor>> KernelCall::call(const std::vector<at::Tensor>& inputs,
                                                        const std::vector<int64_t>& sizes) const {
  TESSERA_CHECK(inputs.size() == packed_.size())
      << "kernel call takes " << packed_.size() << " inputs, got " << inputs.size();
  std::vector<void*> buffers(inputs.size() + dtypes_.size());
  std::vector<at::Tensor> contiguous;  // copies of inputs that were not contiguous
  contiguous.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (packed_[i]) {
      const std::optional<void*> copy = packed_[i]->current(inputs[i]);
      if (!copy) {
        ++declined_;
        return std::nullopt;
      }
      buffers[i] = *copy;
    } else if (inputs[i].is_contiguous()) {
      buffers[i] = inputs[i].data_ptr();
    } else {
      contiguous.push_back(inputs[i].contiguous());
      buffers[i] = contiguous.back().data_ptr();
    }
  }
  const std::vector<std::vector<int64_t>> shapes = runner_.output_shapes(sizes);
  TESSERA_CHECK(shapes.size() == dtypes_.size())
      << "kernel has " << shapes.size() << " outputs, the call expects " << dtypes_.size();
  std::vector<at::Tensor> outputs;
  for (size_t o = 0; o < shapes.size(); ++o) {
    outputs.push_back(at::empty(shapes[o], at::TensorOptions().dtype(dtypes_[o])));
    buffers[inputs.size() + o] = outputs.back().data_ptr();
  }
  runner_.run(buffers, sizes);
  ++calls_;
  return outputs;
}

}  // namespace tessera::python
