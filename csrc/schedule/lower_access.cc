#include "schedule/lower_access.h"

#include "ir/functor.h"
#include "util/check.h"

namespace tessera::schedule {

using ir::Expr;
using ir::ExprKind;

std::vector<Expr> packed_shape(const std::vector<Expr>& shape, int64_t panel) {
  TESSERA_CHECK(!shape.empty() && panel > 0) << "cannot pack a scalar";
  std::vector<Expr> out;
  out.push_back(ir::floordiv(shape.back() + ir::int_imm(panel - 1), ir::int_imm(panel)));
  out.insert(out.end(), shape.begin(), shape.end() - 1);
  out.push_back(ir::int_imm(panel));
  return out;
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
  const int64_t panel = p->second.panel;
  std::vector<Expr> idx;
  idx.push_back(ir::floordiv(indices.back(), ir::int_imm(panel)));
  idx.insert(idx.end(), indices.begin(), indices.end() - 1);
  idx.push_back(ir::floormod(indices.back(), ir::int_imm(panel)));
  return ir::flat_index(p->second.buffer, idx);
}

const ir::Buffer& AccessLowering::packed_buffer_or_plain(const ir::TensorNode* t) const {
  auto p = packed_.find(t);
  return p == packed_.end() ? buffer_of(t) : p->second.buffer;
}

namespace {

class Lowerer : public ir::ExprMutator {
 public:
  explicit Lowerer(const AccessLowering& al) : al_(al) {}

  Expr mutate(const Expr& e) override {
    if (e->kind == ExprKind::kSelect) {
      Expr c = mutate(e->operands[0]);
      ++guard_depth_;
      Expr t = mutate(e->operands[1]);
      Expr f = mutate(e->operands[2]);
      --guard_depth_;
      return ir::with_operands(e, {c, t, f});
    }
    if (e->kind != ExprKind::kAccess) return mutate_children(e);
    const ir::TensorNode* t = e->tensor.get();
    std::vector<Expr> idx;
    for (size_t d = 0; d < e->operands.size(); ++d) {
      Expr i = mutate(e->operands[d]);
      if (guard_depth_ > 0) {
        i = ir::max(ir::min(i, t->shape[d] - ir::int_imm(1)), ir::int_imm(0));
      }
      idx.push_back(i);
    }
    return ir::load(al_.packed_buffer_or_plain(t), al_.index_of(t, idx));
  }

 private:
  const AccessLowering& al_;
  int guard_depth_ = 0;
};

}  // namespace

Expr AccessLowering::lower(const Expr& e) const {
  Lowerer l(*this);
  return l.mutate(e);
}

}  // namespace tessera::schedule
