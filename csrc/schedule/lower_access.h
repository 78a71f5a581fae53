#pragma once
// Turns tensor accesses into flat buffer loads: row-major indexing, packed-operand index
// rewriting (S_packed(S^-1(...)) of ALT's access rewriting, for the split-and-move-outward layout
// that operand packing uses).
#include <map>

#include "ir/buffer.h"
#include "ir/tensor.h"

namespace tessera::schedule {

// A tensor repacked so that dimension `dim` is split into panels of `panel` elements, the panel
// index moved outermost and the position in the panel innermost:
//   packed[p, (the other dims in order), q] = t[..., d_dim = p*panel + q, ...],
// zero-filled past the end. Vector loads along `dim` then walk a contiguous panel, whichever
// dimension it is (B of a GEMM packs its last dim; a conv weight [co, ci, kh, kw] vectorised
// along co packs dim 0; K of Q.K^T packs its row dim).
struct PackedLayout {
  ir::Buffer buffer;
  int64_t panel = 0;
  int dim = -1;  // the dimension split into panels; -1 = the last
};

class AccessLowering {
 public:
  void bind(const ir::TensorNode* t, ir::Buffer b) { buffers_[t] = std::move(b); }
  void bind_packed(const ir::TensorNode* t, PackedLayout p) { packed_[t] = std::move(p); }
  void unbind_packed(const ir::TensorNode* t) { packed_.erase(t); }
  const ir::Buffer& buffer_of(const ir::TensorNode* t) const;
  // The buffer reads of `t` go to: its packed copy when packed, else its own buffer.
  const ir::Buffer& packed_buffer_or_plain(const ir::TensorNode* t) const;
  // The packed layout reads of `t` go through, or null when `t` is read as it is.
  const PackedLayout* packed_layout(const ir::TensorNode* t) const;

  // Rewrites every kAccess in `e` into a kLoad. Reads inside a select's branches keep their
  // indices as they are, though the untaken side may index out of bounds (padding, concat):
  // every consumer of loop IR evaluates a select's branch only where it is taken (the CPU code
  // generator branches, or masks the branch's loads by the condition in vector code; CUDA's ?:
  // and the interpreter are lazy). Clamping each index instead would make a padded row's loads
  // gathers, where unclamped they are masked vector loads.
  ir::Expr lower(const ir::Expr& e) const;

  // Flat index of tensor `t` at `indices` in its (possibly packed) buffer.
  ir::Expr index_of(const ir::TensorNode* t, const std::vector<ir::Expr>& indices) const;

 private:
  std::map<const ir::TensorNode*, ir::Buffer> buffers_;
  std::map<const ir::TensorNode*, PackedLayout> packed_;
};

// Shape of the packed buffer for tensor shape `shape`, panel width `panel`, split dimension `dim`
// (-1: the last).
std::vector<ir::Expr> packed_shape(const std::vector<ir::Expr>& shape, int64_t panel, int dim = -1);

// The dimension of `t` that some access to `t` in `body` indexes with exactly `var` (the first
// such), or -1.
int dim_indexed_by(const ir::Expr& body, const ir::TensorNode* t, const ir::Var& var);

// Indices into the packed buffer for indices `indices` of the original tensor.
std::vector<ir::Expr> packed_indices(const std::vector<ir::Expr>& indices, int64_t panel, int dim);

}  // namespace tessera::schedule
