#include "schedule/lower_access.h"

#include "ir/functor.h"
#include "util/check.h"

namespace tessera::schedule {

using ir::Expr;
using ir::ExprKind;

namespace {

int resolve_dim(int dim, size_t ndim) {
  const int d = dim < 0 ? static_cast<int>(ndim) - 1 : dim;
  TESSERA_CHECK(d >= 0 && d < static_cast<int>(ndim))
      << "pack dimension " << dim << " out of range for " << ndim << " dims";
  return d;
}

}  // namespace

std::vector<Expr> packed_shape(const std::vector<Expr>& shape, int64_t panel, int dim) {
  TESSERA_CHECK(!shape.empty() && panel > 0) << "cannot pack a scalar";
  const int d = resolve_dim(dim, shape.size());
  std::vector<Expr> out;
  out.push_back(ir::floordiv(shape[d] + ir::int_imm(panel - 1), ir::int_imm(panel)));
  for (size_t k = 0; k < shape.size(); ++k) {
    if (static_cast<int>(k) != d) out.push_back(shape[k]);
  }
  out.push_back(ir::int_imm(panel));
  return out;
}

std::vector<Expr> packed_indices(const std::vector<Expr>& indices, int64_t panel, int dim) {
  const int d = resolve_dim(dim, indices.size());
  std::vector<Expr> idx;
  idx.push_back(ir::floordiv(indices[d], ir::int_imm(panel)));
  for (size_t k = 0; k < indices.size(); ++k) {
    if (static_cast<int>(k) != d) idx.push_back(indices[k]);
  }
  idx.push_back(ir::floormod(indices[d], ir::int_imm(panel)));
  return idx;
}

int dim_indexed_by(const Expr& body, const ir::TensorNode* t, const ir::Var& var) {
  int found = -1;
  ir::visit_expr(body, [&](const Expr& e) {
    if (found >= 0 || e->kind != ExprKind::kAccess || e->tensor.get() != t) return;
    for (size_t d = 0; d < e->operands.size(); ++d) {
      if (e->operands[d].same_as(var)) {
        found = static_cast<int>(d);
        return;
      }
    }
  });
  return found;
}

const ir::Buffer& AccessLowering::buffer_of(const ir::TensorNode* t) const {
  auto it = buffers_.find(t);
  TESSERA_CHECK(it != buffers_.end()) << "tensor " << t->name << " has no buffer (not an input, "
                                      << "output or materialised stage of this kernel)";
  return it->second;
}

Expr AccessLowering::index_of(const ir::TensorNode* t, const std::vector<Expr>& indices) const {
  auto p = packed_.find(t);
  if (p == packed_.end()) return ir::flat_index(buffer_of(t), indices);
  return ir::flat_index(p->second.buffer, packed_indices(indices, p->second.panel, p->second.dim));
}

const ir::Buffer& AccessLowering::packed_buffer_or_plain(const ir::TensorNode* t) const {
  auto p = packed_.find(t);
  return p == packed_.end() ? buffer_of(t) : p->second.buffer;
}

const PackedLayout* AccessLowering::packed_layout(const ir::TensorNode* t) const {
  auto p = packed_.find(t);
  return p == packed_.end() ? nullptr : &p->second;
}

namespace {

class Lowerer : public ir::ExprMutator {
 public:
  explicit Lowerer(const AccessLowering& al) : al_(al) {}

  Expr mutate(const Expr& e) override {
    if (e->kind != ExprKind::kAccess) return mutate_children(e);
    const ir::TensorNode* t = e->tensor.get();
    std::vector<Expr> idx;
    for (const Expr& i : e->operands) idx.push_back(mutate(i));
    return ir::load(al_.packed_buffer_or_plain(t), al_.index_of(t, idx));
  }

 private:
  const AccessLowering& al_;
};

}  // namespace

Expr AccessLowering::lower(const Expr& e) const {
  Lowerer l(*this);
  return l.mutate(e);
}

}  // namespace tessera::schedule
