#include "schedule/local_padding.h"

#include "ir/functor.h"

namespace tessera::schedule {

namespace {

using ir::Expr;

class Clamper : public ir::ExprMutator {
 public:
  Clamper(const ir::ComputeOpNode& op, const std::vector<bool>& cut,
          const std::vector<int64_t>& tile_reg, int vector_axis, const AccessLowering& al)
      : op_(op), cut_(cut), tile_reg_(tile_reg), vaxis_(vector_axis), al_(al) {}

  bool lanes_padded() const { return lanes_padded_; }

  Expr mutate(const Expr& e) override {
    if (e->kind != ir::ExprKind::kAccess) return mutate_children(e);
    std::vector<Expr> idx;
    bool changed = false;
    for (size_t d = 0; d < e->operands.size(); ++d) {
      idx.push_back(safe_index(*e->tensor, static_cast<int>(d), mutate(e->operands[d])));
      changed |= !idx.back().same_as(e->operands[d]);
    }
    return changed ? ir::with_operands(e, std::move(idx)) : e;
  }

 private:
  // Does dim `d` of `t` read a zero-filled packed panel along axis `a` (index exactly the axis,
  // panels whole multiples of its register tile)?
  bool padded(const ir::TensorNode& t, int d, const Expr& index, size_t a) const {
    const PackedLayout* p = al_.packed_layout(&t);
    if (p == nullptr || !index.same_as(op_.axes[a].var)) return false;
    const int dim = p->dim < 0 ? t.ndim() - 1 : p->dim;
    return dim == d && p->panel % tile_reg_[a] == 0;
  }

  Expr safe_index(const ir::TensorNode& t, int d, Expr index) {
    ir::VarMap clamp;
    for (size_t a = 0; a < op_.axes.size(); ++a) {
      const ir::Var& v = op_.axes[a].var;
      if (!cut_[a] || !ir::uses_var(index, v) || padded(t, d, index, a)) continue;
      if (static_cast<int>(a) == vaxis_) {
        lanes_padded_ = false;
        continue;
      }
      clamp[v.get()] = ir::min(v, op_.axes[a].extent - ir::int_imm(1));
    }
    return ir::substitute(index, clamp);
  }

  const ir::ComputeOpNode& op_;
  const std::vector<bool>& cut_;
  const std::vector<int64_t>& tile_reg_;
  const int vaxis_;
  const AccessLowering& al_;
  bool lanes_padded_ = true;
};

}  // namespace

SafeReads make_safe_reads(const ir::Expr& body, const ir::ComputeOpNode& op,
                          const std::vector<bool>& cut, const std::vector<int64_t>& tile_reg,
                          int vector_axis, const AccessLowering& al) {
  Clamper c(op, cut, tile_reg, vector_axis, al);
  SafeReads r;
  r.value = c.mutate(body);
  r.lanes_padded = c.lanes_padded();
  return r;
}

}  // namespace tessera::schedule
