#pragma once
// Data-dependent reads: index_select / embedding and torch.gather. An index tensor's values
// become part of another tensor's access index, so these ops are injective (tag "injective")
// and inline into their consumers like any shape op.
//
// Indices are clamped into [0, extent) before use: a kernel must never read outside its
// buffers, whatever the data says (torch raises on out-of-range indices; callers that need that
// check must make it before calling the kernel).
#include <cstdint>
#include <string>

#include "ir/tensor.h"

namespace tessera::ops {

// out[i_0..i_{k-1} at `axis` replaced by the dims of `indices`] = x[.., indices[..], ..]:
//   index_select(x, axis, idx) with 1-D idx is torch.index_select;
//   index_select(weight, 0, ids) with any-shaped ids is torch.embedding.
// `indices` must be an integer tensor.
ir::Tensor index_select(const ir::Tensor& x, int64_t axis, const ir::Tensor& indices,
                        const std::string& name = "index_select");

// torch.gather(x, dim, index): out has index's shape, out[p] = x[p with dim replaced by
// index[p]]. index must be an integer tensor with x's rank.
ir::Tensor gather(const ir::Tensor& x, int64_t dim, const ir::Tensor& index,
                  const std::string& name = "gather");

}  // namespace tessera::ops
