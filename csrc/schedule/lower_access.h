#pragma once
// Turns tensor accesses into flat buffer loads: row-major indexing, packed-operand index
// rewriting (S_packed(S^-1(...)) of ALT's access rewriting, for the split-and-move-outward layout
// that operand packing uses) and clamping of reads guarded by a select.
#include <map>

#include "ir/buffer.h"
#include "ir/tensor.h"

namespace tessera::schedule {

// A tensor repacked so that its last dimension is split into panels of `panel` elements and the
// panel index moved outermost: packed[p, d0, ..., d(n-2), q] = t[d0, ..., d(n-2), p*panel + q],
// zero-filled past the end. Vector loads along the last dimension then walk a contiguous panel.
struct PackedLayout {
  ir::Buffer buffer;
  int64_t panel = 0;
};

class AccessLowering {
 public:
  void bind(const ir::TensorNode* t, ir::Buffer b) { buffers_[t] = std::move(b); }
  void bind_packed(const ir::TensorNode* t, PackedLayout p) { packed_[t] = std::move(p); }
  void unbind_packed(const ir::TensorNode* t) { packed_.erase(t); }
  const ir::Buffer& buffer_of(const ir::TensorNode* t) const;
  // The buffer reads of `t` go to: its packed copy when packed, else its own buffer.
  const ir::Buffer& packed_buffer_or_plain(const ir::TensorNode* t) const;

  // Rewrites every kAccess in `e` into a kLoad. Reads inside a select's branches have their
  // indices clamped into the tensor's bounds: a select evaluates both sides in vector code, and
  // the untaken side may index out of bounds (padding, concat).
  ir::Expr lower(const ir::Expr& e) const;

  // Flat index of tensor `t` at `indices` in its (possibly packed) buffer.
  ir::Expr index_of(const ir::TensorNode* t, const std::vector<ir::Expr>& indices) const;

 private:
  std::map<const ir::TensorNode*, ir::Buffer> buffers_;
  std::map<const ir::TensorNode*, PackedLayout> packed_;
};

// Shape of the packed buffer for tensor shape `shape` and panel width `panel`.
std::vector<ir::Expr> packed_shape(const std::vector<ir::Expr>& shape, int64_t panel);

}  // namespace tessera::schedule
