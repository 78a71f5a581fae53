// Traversal merging (EinNet 4.1).
#include "derive/index_analysis.h"
#include "derive/rules_intra.h"
#include "ir/functor.h"

namespace tessera::derive {

using ir::Expr;
using ir::Tensor;

namespace {

// Replaces every read producer[idx] by the producer's body at idx.
class InlineProducer : public ir::ExprMutator {
 public:
  explicit InlineProducer(const Tensor& producer) : producer_(producer) {}
  Expr mutate(const Expr& e) override {
    Expr m = mutate_children(e);
    if (m->kind != ir::ExprKind::kAccess || m->tensor.get() != producer_.get()) return m;
    ir::VarMap vmap;
    const auto& axes = producer_->op->axes;
    for (size_t d = 0; d < axes.size(); ++d) vmap[axes[d].var.get()] = m->operands[d];
    return substitute_body(producer_->op->body, vmap);
  }

 private:
  const Tensor& producer_;
};

}  // namespace

std::optional<State> merge_traversal(const State& s, const Tensor& consumer,
                                     const Tensor& producer) {
  if (consumer->is_placeholder() || producer->is_placeholder()) return std::nullopt;
  if (producer->op->reduce != ir::ReduceKind::kNone) return std::nullopt;
  const std::vector<Expr> reads = accesses_of(consumer->op->body, producer);
  if (reads.empty()) return std::nullopt;
  for (const Expr& r : reads) {
    if (!reads_in_bounds(r)) return std::nullopt;  // Phi(X x Y) must lie within Z
  }
  InlineProducer inl(producer);
  Tensor merged = ir::with_definition(consumer, consumer->op->axes, consumer->op->reduce_axes,
                                      inl.mutate(consumer->op->body));
  return replace_scope(s, consumer, {merged, {}},
                       "merge_traversal(" + producer->name + " into " + consumer->name + ")");
}

std::vector<State> traversal_mergings(const State& s) {
  std::vector<State> out;
  for (const Tensor& consumer : scopes(s)) {
    for (const Tensor& producer : ir::direct_inputs(consumer)) {
      if (auto next = merge_traversal(s, consumer, producer)) out.push_back(std::move(*next));
    }
  }
  return out;
}

}  // namespace tessera::derive
