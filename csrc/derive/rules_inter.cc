#include "derive/rules_inter.h"

#include <algorithm>
#include <sstream>

#include "derive/index_analysis.h"
#include "ir/functor.h"
#include "ir/structural_hash.h"

namespace tessera::derive {

using ir::Expr;
using ir::ExprKind;
using ir::IterVar;
using ir::Tensor;

namespace {

bool valid_axis(const Tensor& scope, int axis) {
  return !scope->is_placeholder() && axis >= 0 &&
         static_cast<size_t>(axis) < scope->op->axes.size() && has_const_extents(scope);
}

// L_x src[x with dimension `axis` moved by `shift`] over `like`'s iterators (a view).
Tensor view_of(const Tensor& like, const Tensor& src, int axis, int64_t shift) {
  ir::VarMap vmap;
  std::vector<IterVar> x = fresh_copies(like->op->axes, &vmap);
  std::vector<Expr> idx = iter_exprs(x);
  idx[axis] = idx[axis] + ir::int_imm(shift);
  return make_scope(like->name, x, {}, ir::ReduceKind::kNone, ir::access(src, idx), "derived",
                    like->pad_value);
}

bool depends_on(const Tensor& t, const Tensor& other) {
  for (const Tensor& c : ir::collect_dag({t}).computes) {
    if (c.get() == other.get()) return true;
  }
  return false;
}

}  // namespace

// ---- splitting --------------------------------------------------------------------------------

std::optional<State> split_expression(const State& s, const Tensor& scope, int axis,
                                      int64_t point) {
  if (!valid_axis(scope, axis)) return std::nullopt;
  const int64_t extent = const_extent(scope->op->axes[axis]);
  if (point <= 0 || point >= extent) return std::nullopt;
  Tensor lo = shift_iterator(scope, false, axis, point, 0, scope->name + "_lo");
  Tensor hi = shift_iterator(scope, false, axis, extent - point, -point, scope->name + "_hi");
  ir::VarMap vmap;
  std::vector<IterVar> x = fresh_copies(scope->op->axes, &vmap);
  std::vector<Expr> hi_idx = iter_exprs(x);
  hi_idx[axis] = hi_idx[axis] - ir::int_imm(point);
  Expr body = ir::select(ir::lt(x[axis].var, ir::int_imm(point)), ir::access(lo, iter_exprs(x)),
                         ir::access(hi, hi_idx));
  Tensor concat =
      make_scope(scope->name, x, {}, ir::ReduceKind::kNone, body, "concat", scope->pad_value);
  std::ostringstream rule;
  rule << "split_expression(" << scope->name << "." << scope->op->axes[axis].var->name << " at "
       << point << ")";
  return replace_scope(s, scope, {concat, {}}, rule.str());
}

std::vector<State> expression_splittings(const State& s) {
  std::vector<State> out;
  for (const Tensor& scope : scopes(s)) {
    for (size_t a = 0; a < scope->op->axes.size(); ++a) {
      const int64_t e = const_extent(scope->op->axes[a]);
      if (e < 2) continue;
      if (auto next = split_expression(s, scope, static_cast<int>(a), e / 2)) {
        out.push_back(std::move(*next));
      }
    }
  }
  return out;
}

// ---- merging ----------------------------------------------------------------------------------

namespace {

// Simultaneous walk of two bodies: equal up to the iterator correspondence and up to pairs of
// different tensors read at the same places.
class PairedWalk {
 public:
  explicit PairedWalk(ir::VarMap corr) : corr_(std::move(corr)) {}

  bool equal(const Expr& x, const Expr& y) {
    if (x->kind != y->kind || x->dtype != y->dtype || x->operands.size() != y->operands.size()) {
      return false;
    }
    switch (x->kind) {
      case ExprKind::kIntImm:
        return x->int_value == y->int_value;
      case ExprKind::kFloatImm:
        return x->float_value == y->float_value;
      case ExprKind::kVar: {
        auto it = corr_.find(y.get());
        return it != corr_.end() ? it->second.same_as(x) : x.same_as(y);
      }
      case ExprKind::kCall:
        if (x->call_op != y->call_op) return false;
        break;
      case ExprKind::kAccess:
        if (x->tensor.get() != y->tensor.get() && !pair(x->tensor, y->tensor)) return false;
        break;
      case ExprKind::kLoad:
        return false;
      default:
        break;
    }
    for (size_t k = 0; k < x->operands.size(); ++k) {
      if (!equal(x->operands[k], y->operands[k])) return false;
    }
    return true;
  }

  const std::vector<std::pair<Tensor, Tensor>>& pairs() const { return pairs_; }

 private:
  // Each tensor of a pairs with one tensor of b, consistently.
  bool pair(const Tensor& t1, const Tensor& t2) {
    for (const auto& [p1, p2] : pairs_) {
      if (p1.get() == t1.get() || p2.get() == t2.get()) {
        return p1.get() == t1.get() && p2.get() == t2.get();
      }
    }
    pairs_.push_back({t1, t2});
    return true;
  }

  ir::VarMap corr_;  // b's iterator -> a's iterator
  std::vector<std::pair<Tensor, Tensor>> pairs_;
};

// Same iterator extents except at `axis`, same reduction.
bool same_iteration_space(const Tensor& a, const Tensor& b, int axis) {
  const auto& oa = *a->op;
  const auto& ob = *b->op;
  if (oa.reduce != ob.reduce || oa.axes.size() != ob.axes.size() ||
      oa.reduce_axes.size() != ob.reduce_axes.size() || a->dtype != b->dtype) {
    return false;
  }
  for (size_t d = 0; d < oa.axes.size(); ++d) {
    if (static_cast<int>(d) != axis && const_extent(oa.axes[d]) != const_extent(ob.axes[d])) {
      return false;
    }
  }
  for (size_t d = 0; d < oa.reduce_axes.size(); ++d) {
    if (const_extent(oa.reduce_axes[d]) != const_extent(ob.reduce_axes[d])) return false;
  }
  return true;
}

// Merged scope for adjacent ranges: b is a shifted by a's extent along `axis`.
std::optional<Tensor> merge_adjacent(const Tensor& a, const Tensor& b, int axis) {
  const int64_t ea = const_extent(a->op->axes[axis]), eb = const_extent(b->op->axes[axis]);
  Tensor shifted = shift_iterator(a, false, axis, eb, -ea);
  if (!ir::structural_equal(std::vector<Tensor>{shifted}, std::vector<Tensor>{b})) {
    return std::nullopt;
  }
  return shift_iterator(a, false, axis, ea + eb, 0, a->name + "_" + b->name);
}

// The index dimension of `read` that is exactly `v`, when `v` appears nowhere else in it.
std::optional<size_t> sole_dim(const Expr& read, const Expr& v) {
  std::optional<size_t> dim;
  for (size_t d = 0; d < read->operands.size(); ++d) {
    if (read->operands[d].same_as(v)) {
      if (dim) return std::nullopt;
      dim = d;
    } else if (ir::uses_var(read->operands[d], v)) {
      return std::nullopt;
    }
  }
  return dim;
}

// Replaces reads of paired tensors (by a's side) with another tensor, or with 0 when the
// replacement is null (used to check the merged iterator appears nowhere else).
class ReplaceReads : public ir::ExprMutator {
 public:
  explicit ReplaceReads(std::vector<std::pair<Tensor, Tensor>> map) : map_(std::move(map)) {}
  Expr mutate(const Expr& e) override {
    if (e->kind == ExprKind::kAccess) {
      for (const auto& [from, to] : map_) {
        if (e->tensor.get() != from.get()) continue;
        if (!to) return ir::make_const(e->dtype, 0.0);
        std::vector<Expr> idx;
        for (const Expr& i : e->operands) idx.push_back(mutate(i));
        return ir::access(to, idx);
      }
    }
    return mutate_children(e);
  }

 private:
  std::vector<std::pair<Tensor, Tensor>> map_;
};

// T1 ++ T2 along dimension j: select(i_j < n1, T1[i], T2[i_j - n1]).
Tensor concat_along(const Tensor& t1, const Tensor& t2, size_t j) {
  std::vector<int64_t> s1 = const_shape(t1);
  const int64_t n1 = s1[j];
  std::vector<IterVar> x;
  for (size_t d = 0; d < s1.size(); ++d) {
    const int64_t n = d == j ? n1 + const_shape(t2)[j] : s1[d];
    x.push_back(fresh_iter("c" + std::to_string(d), n));
  }
  std::vector<Expr> i1 = iter_exprs(x), i2 = iter_exprs(x);
  i2[j] = i2[j] - ir::int_imm(n1);
  Expr body = ir::select(ir::lt(x[j].var, ir::int_imm(n1)), ir::access(t1, i1), ir::access(t2, i2));
  return make_scope(t1->name + "_" + t2->name, x, {}, ir::ReduceKind::kNone, body, "concat");
}

// Merged scope when a and b read different tensors at the same places.
std::optional<Tensor> merge_inputs(const Tensor& a, const Tensor& b, int axis) {
  const auto& oa = *a->op;
  const auto& ob = *b->op;
  ir::VarMap corr;
  for (size_t d = 0; d < oa.axes.size(); ++d) corr[ob.axes[d].var.get()] = oa.axes[d].var;
  for (size_t d = 0; d < oa.reduce_axes.size(); ++d) {
    corr[ob.reduce_axes[d].var.get()] = oa.reduce_axes[d].var;
  }
  PairedWalk walk(corr);
  if (!walk.equal(oa.body, ob.body) || walk.pairs().empty()) return std::nullopt;
  const Expr& v = oa.axes[axis].var;
  const int64_t ea = const_extent(oa.axes[axis]), eb = const_extent(ob.axes[axis]);
  std::vector<std::pair<Tensor, Tensor>> to_concat, to_zero;
  for (const auto& [t1, t2] : walk.pairs()) {
    std::optional<size_t> dim;
    for (const Expr& r : accesses_of(oa.body, t1)) {
      auto d = sole_dim(r, v);
      if (!d || (dim && *d != *dim)) return std::nullopt;
      dim = d;
    }
    const std::vector<int64_t> s1 = const_shape(t1), s2 = const_shape(t2);
    if (s1.size() != s2.size() || s1[*dim] != ea || s2[*dim] != eb) return std::nullopt;
    for (size_t d = 0; d < s1.size(); ++d) {
      if (d != *dim && s1[d] != s2[d]) return std::nullopt;
    }
    to_concat.push_back({t1, concat_along(t1, t2, *dim)});
    to_zero.push_back({t1, nullptr});
  }
  // Outside the paired reads the merged iterator must not appear: those parts are shared.
  if (ir::uses_var(ReplaceReads(to_zero).mutate(oa.body), v)) return std::nullopt;
  Tensor wide = shift_iterator(a, false, axis, ea + eb, 0, a->name + "_" + b->name);
  // shift_iterator copied a's reads; point the paired ones at the concatenations.
  return ir::with_definition(wide, wide->op->axes, wide->op->reduce_axes,
                             ReplaceReads(to_concat).mutate(wide->op->body));
}

}  // namespace

std::optional<State> merge_expressions(const State& s, const Tensor& a, const Tensor& b, int axis) {
  if (a.get() == b.get() || !valid_axis(a, axis) || !valid_axis(b, axis)) return std::nullopt;
  if (depends_on(a, b) || depends_on(b, a) || !same_iteration_space(a, b, axis)) {
    return std::nullopt;
  }
  std::optional<Tensor> merged = merge_adjacent(a, b, axis);
  if (!merged) merged = merge_inputs(a, b, axis);
  if (!merged) return std::nullopt;
  const int64_t ea = const_extent(a->op->axes[axis]);
  std::map<const ir::TensorNode*, Replacement> repl;
  repl[a.get()] = {view_of(a, *merged, axis, 0), {}};
  repl[b.get()] = {view_of(b, *merged, axis, ea), {}};
  return replace_scopes(s, repl, "merge_expressions(" + a->name + ", " + b->name + ")");
}

std::vector<State> expression_mergings(const State& s) {
  std::vector<State> out;
  const std::vector<Tensor> all = scopes(s);
  for (size_t i = 0; i < all.size(); ++i) {
    for (size_t j = 0; j < all.size(); ++j) {
      if (i == j) continue;
      for (size_t a = 0; a < all[i]->op->axes.size(); ++a) {
        if (auto next = merge_expressions(s, all[i], all[j], static_cast<int>(a))) {
          out.push_back(std::move(*next));
        }
      }
    }
  }
  return out;
}

// ---- fusion -----------------------------------------------------------------------------------

namespace {

// True when `read` is `body` or a factor of the product chain at the top of `body`.
bool is_factor(const Expr& body, const Expr& read) {
  if (body.same_as(read)) return true;
  if (body->kind != ExprKind::kMul) return false;
  return is_factor(body->operands[0], read) || is_factor(body->operands[1], read);
}

class ReplaceNode : public ir::ExprMutator {
 public:
  ReplaceNode(const Expr& from, const Expr& to) : from_(from), to_(to) {}
  Expr mutate(const Expr& e) override { return e.same_as(from_) ? to_ : mutate_children(e); }

 private:
  const Expr& from_;
  const Expr& to_;
};

}  // namespace

std::optional<State> fuse_expressions(const State& s, const Tensor& consumer,
                                      const Tensor& producer) {
  if (consumer->is_placeholder() || producer->is_placeholder()) return std::nullopt;
  if (producer->op->reduce != ir::ReduceKind::kSum) return std::nullopt;
  const ir::ReduceKind ck = consumer->op->reduce;
  if (ck != ir::ReduceKind::kSum && ck != ir::ReduceKind::kNone) return std::nullopt;
  const std::vector<Expr> reads = accesses_of(consumer->op->body, producer);
  if (reads.size() != 1 || !is_factor(consumer->op->body, reads[0])) return std::nullopt;
  const Expr& read = reads[0];
  if (!reads_in_bounds(read)) return std::nullopt;
  ir::VarMap vmap;
  const auto& axes = producer->op->axes;
  for (size_t d = 0; d < axes.size(); ++d) vmap[axes[d].var.get()] = read->operands[d];
  std::vector<IterVar> w = fresh_copies(producer->op->reduce_axes, &vmap);
  const Expr inlined = substitute_body(producer->op->body, vmap);
  std::vector<IterVar> red = consumer->op->reduce_axes;
  red.insert(red.end(), w.begin(), w.end());
  auto op = std::make_shared<ir::ComputeOpNode>(*consumer->op);
  op->reduce = ir::ReduceKind::kSum;
  op->reduce_axes = red;
  op->body = ReplaceNode(read, inlined).mutate(consumer->op->body);
  auto fused = std::make_shared<ir::TensorNode>(*consumer);
  fused->op = op;
  return replace_scope(s, consumer, {fused, {}},
                       "fuse_expressions(" + producer->name + " into " + consumer->name + ")");
}

std::vector<State> expression_fusions(const State& s) {
  std::vector<State> out;
  for (const Tensor& consumer : scopes(s)) {
    for (const Tensor& producer : ir::direct_inputs(consumer)) {
      if (auto next = fuse_expressions(s, consumer, producer)) out.push_back(std::move(*next));
    }
  }
  return out;
}

}  // namespace tessera::derive
