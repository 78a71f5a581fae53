#include "derive/matching.h"

#include <algorithm>
#include <cstdlib>
#include <unordered_map>

#include "derive/config.h"
#include "derive/index_analysis.h"
#include "ir/functor.h"
#include "ir/linear_form.h"

namespace tessera::derive {

using ir::Expr;
using ir::ExprKind;
using ir::IterVar;
using ir::Tensor;

const char* operator_kind_name(OperatorKind k) {
  switch (k) {
    case OperatorKind::kElementwise:
      return "elementwise";
    case OperatorKind::kMatmul:
      return "matmul";
    case OperatorKind::kBatchMatmul:
      return "batch_matmul";
    case OperatorKind::kConv2d:
      return "conv2d";
    case OperatorKind::kG2bmm:
      return "g2bmm";
  }
  return "?";
}

const std::vector<OperatorKind>& table_operators() {
  static const std::vector<OperatorKind> kAll = {OperatorKind::kElementwise, OperatorKind::kMatmul,
                                                 OperatorKind::kBatchMatmul, OperatorKind::kConv2d,
                                                 OperatorKind::kG2bmm};
  return kAll;
}

namespace {

using CoefMap = std::unordered_map<const ir::ExprNode*, int64_t>;

// A tensor read flattened to one dimension: flat = sum(coef[v] * v) + offset.
struct FlatRead {
  CoefMap coef;
  int64_t offset = 0;
  int padded_dims = 0;  // index dims that may leave the shape
};

std::vector<int64_t> row_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> st(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) st[d - 1] = st[d] * shape[d];
  return st;
}

std::optional<FlatRead> flatten_read(const Expr& access) {
  for (const Expr& d : access->tensor->shape) {
    if (!d->is_const_int()) return std::nullopt;
  }
  const std::vector<int64_t> st = row_strides(const_shape(access->tensor));
  FlatRead out;
  for (size_t d = 0; d < access->operands.size(); ++d) {
    auto aff = affine_index(access->operands[d]);
    if (!aff) return std::nullopt;
    for (const auto& [v, c] : aff->terms) out.coef[v.get()] += c * st[d];
    out.offset += aff->constant * st[d];
  }
  for (size_t d = 0; d < access->operands.size(); ++d) {
    const ir::ConstIntBound b = index_bound(access->operands[d]);
    const int64_t n = access->tensor->shape[d]->int_value;
    if (b.lo == ir::kNoLowerBound || b.hi == ir::kNoUpperBound || b.lo < 0 || b.hi >= n) {
      ++out.padded_dims;
    }
  }
  return out;
}

int64_t coef_of(const CoefMap& m, const ir::ExprNode* v) {
  auto it = m.find(v);
  return it == m.end() ? 0 : it->second;
}

// The two reads of a sum-of-products body A[..] * B[..], or nullopt.
std::optional<std::pair<Expr, Expr>> product_reads(const Tensor& scope) {
  const ir::ComputeOpNode& op = *scope->op;
  if (op.reduce != ir::ReduceKind::kSum || op.body->kind != ExprKind::kMul) return std::nullopt;
  const Expr& x = op.body->operands[0];
  const Expr& y = op.body->operands[1];
  if (x->kind != ExprKind::kAccess || y->kind != ExprKind::kAccess) return std::nullopt;
  return std::make_pair(x, y);
}

// True when `order` (outermost first) forms one strided block in `coef`: each iterator's
// coefficient is the next one's times the next one's extent, the innermost positive.
bool is_block(const std::vector<IterVar>& order, const CoefMap& coef, int64_t* stride) {
  if (order.empty()) {
    *stride = 0;
    return true;
  }
  for (size_t j = 0; j + 1 < order.size(); ++j) {
    if (coef_of(coef, order[j].var.get()) !=
        coef_of(coef, order[j + 1].var.get()) * const_extent(order[j + 1])) {
      return false;
    }
  }
  *stride = coef_of(coef, order.back().var.get());
  return *stride > 0;
}

// Candidate flattening orders of a group: by descending coefficient in each tensor that has it.
std::vector<std::vector<IterVar>> candidate_orders(const std::vector<IterVar>& group,
                                                   const std::vector<const CoefMap*>& tensors) {
  std::vector<std::vector<IterVar>> out;
  for (const CoefMap* c : tensors) {
    std::vector<IterVar> order = group;
    std::stable_sort(order.begin(), order.end(), [&](const IterVar& x, const IterVar& y) {
      return std::abs(coef_of(*c, x.var.get())) > std::abs(coef_of(*c, y.var.get()));
    });
    out.push_back(order);
  }
  if (out.empty()) out.push_back(group);
  return out;
}

struct RoleSpec {
  std::vector<IterVar>* group;
  bool in_a, in_b, in_out;
};

// Matches a sum of products against matmul / batch matmul with reads (ra as I0, rb as I1).
MatchOutcome match_contraction_mapping(const State& s, const Tensor& scope, const Expr& ra,
                                       const Expr& rb, OperatorKind kind,
                                       const DeriveContext& ctx) {
  MatchOutcome res;
  res.distance = DeriveConstants::kNoMatchDistance;
  auto fa = flatten_read(ra);
  auto fb = flatten_read(rb);
  if (!fa || !fb) return res;
  const ir::ComputeOpNode& op = *scope->op;
  OperatorMatch m;
  m.kind = kind;
  m.scope = scope;
  m.out_layout_free = !is_output(s, scope);
  CoefMap fo;
  {
    std::vector<int64_t> shape;
    for (const IterVar& iv : op.axes) shape.push_back(const_extent(iv));
    const std::vector<int64_t> st = row_strides(shape);
    for (size_t d = 0; d < op.axes.size(); ++d) fo[op.axes[d].var.get()] = st[d];
  }
  std::vector<IterVar> all = op.axes;
  all.insert(all.end(), op.reduce_axes.begin(), op.reduce_axes.end());
  for (const IterVar& iv : all) {
    if (const_extent(iv) == 1) continue;
    const bool ia = coef_of(fa->coef, iv.var.get()) != 0;
    const bool ib = coef_of(fb->coef, iv.var.get()) != 0;
    const bool io = coef_of(fo, iv.var.get()) != 0;
    if (ia && ib && io && kind == OperatorKind::kBatchMatmul) {
      m.batch.push_back(iv);
    } else if (ia && !ib && io) {
      m.m.push_back(iv);
    } else if (!ia && ib && io) {
      m.n.push_back(iv);
    } else if (ia && ib && !io) {
      m.k.push_back(iv);
    } else {
      ++m.mismatched;
    }
  }
  // Role order of each operand: a = [batch, m, k], b = [batch, k, n], out = [batch, m, n].
  const std::vector<RoleSpec> roles = {{&m.batch, true, true, true},
                                       {&m.m, true, false, true},
                                       {&m.k, true, true, false},
                                       {&m.n, false, true, true}};
  m.a = OperandLayout{ra->tensor, ra, {}, fa->offset, false, fa->padded_dims};
  m.b = OperandLayout{rb->tensor, rb, {}, fb->offset, false, fb->padded_dims};
  m.out = OperandLayout{scope, Expr(), {}, 0, false, 0};
  for (const RoleSpec& r : roles) {
    if (r.group == &m.batch && kind != OperatorKind::kBatchMatmul) continue;
    std::vector<const CoefMap*> maps;
    if (r.in_a) maps.push_back(&fa->coef);
    if (r.in_b) maps.push_back(&fb->coef);
    if (r.in_out && !m.out_layout_free) maps.push_back(&fo);
    // Pick the order that makes the most operands one block (activations before weights).
    std::vector<IterVar> best;
    int best_score = -1;
    for (const std::vector<IterVar>& order : candidate_orders(*r.group, maps)) {
      int64_t st = 0;
      int score = 0;
      if (r.in_a && is_block(order, fa->coef, &st)) score += ctx.is_weight(ra->tensor) ? 1 : 2;
      if (r.in_b && is_block(order, fb->coef, &st)) score += ctx.is_weight(rb->tensor) ? 1 : 2;
      if (r.in_out && !m.out_layout_free && is_block(order, fo, &st)) score += 2;
      if (score > best_score) best = order, best_score = score;
    }
    *r.group = best;
    auto record = [&](OperandLayout* o, const CoefMap& c) {
      int64_t st = 0;
      if (!is_block(best, c, &st)) o->needs_layout = true;
      o->strides.push_back(st);
    };
    if (r.in_a) record(&m.a, fa->coef);
    if (r.in_b) record(&m.b, fb->coef);
    if (r.in_out && !m.out_layout_free) record(&m.out, fo);
  }
  m.B = extent_product(m.batch);
  m.M = extent_product(m.m);
  m.N = extent_product(m.n);
  m.K = extent_product(m.k);
  if (m.out_layout_free && kind == OperatorKind::kBatchMatmul) {
    m.out.strides = {m.M * m.N, m.N, 1};
  } else if (m.out_layout_free) {
    m.out.strides = {m.N, 1};
  }
  // EinNet's distance counts mismatched iterators; padded reads count too (tightening fixes
  // them). Operands that are not one strided block are not counted: the instantiation builds
  // them with layout eOperators (folded at compile time for weights), whose cost is the
  // measurement's business.
  res.distance = m.mismatched + m.a.padded_dims + m.b.padded_dims;
  res.match = m;
  return res;
}

MatchOutcome match_contraction(const State& s, const Tensor& scope, OperatorKind kind,
                               const DeriveContext& ctx) {
  MatchOutcome none;
  none.distance = DeriveConstants::kNoMatchDistance;
  auto reads = product_reads(scope);
  if (!reads || !has_const_extents(scope)) return none;
  MatchOutcome x = match_contraction_mapping(s, scope, reads->first, reads->second, kind, ctx);
  MatchOutcome y = match_contraction_mapping(s, scope, reads->second, reads->first, kind, ctx);
  return y.distance < x.distance ? y : x;
}

// Conv2d through the iterator mapping table: groups by (X, K, O), then the attributes from X's
// index: X[n, c, oh*st + r*dil - pad, ow*st + s*dil - pad] with n, c, r, s optional (extent
// 1). `form` counts what keeps the expression from being ops::conv2d on X as stored: index
// dims of another form, iterators of a right group that X does not place, output extents that
// are not the convolution's.
class ConvMatcher {
 public:
  ConvMatcher(const State& s, const Tensor& scope, const Expr& x, const Expr& k)
      : s_(s), scope_(scope), x_(x), k_(k) {}

  MatchOutcome run() {
    MatchOutcome res;
    res.distance = DeriveConstants::kNoMatchDistance;
    if (x_->operands.size() != 4 || !has_const_extents(scope_)) return res;
    classify();
    place_batch_and_channel();
    spatial_ok_[0] = place_spatial(2, &m_.conv.oh, &m_.conv.r);
    spatial_ok_[1] = place_spatial(3, &m_.conv.ow, &m_.conv.s);
    form_ += static_cast<int>(xo_.size() + xk_.size());  // in the right group, not placed
    check_extents();
    res.distance = mismatched_ + form_;
    if (res.distance == 0) {
      finish();
      res.match = m_;
    }
    return res;
  }

 private:
  bool in(const Expr& read, const IterVar& iv) const {
    for (const Expr& i : read->operands) {
      if (ir::uses_var(i, iv.var)) return true;
    }
    return false;
  }
  // An iterator of the scope with extent 1 (left out of every group: it is always 0).
  bool is_unit(const ir::ExprNode* v) const {
    for (const auto* ivs : {&scope_->op->axes, &scope_->op->reduce_axes}) {
      for (const IterVar& iv : *ivs) {
        if (iv.var.get() == v) return const_extent(iv) == 1;
      }
    }
    return false;
  }
  bool is_axis(const IterVar& iv) const {
    for (const IterVar& a : scope_->op->axes) {
      if (a.var.same_as(iv.var)) return true;
    }
    return false;
  }
  // Moves iterator `v` from one group list to another; false when it is not in `from`.
  static bool move_to(std::vector<IterVar>* from, const ir::ExprNode* v, std::vector<IterVar>* to) {
    for (auto it = from->begin(); it != from->end(); ++it) {
      if (it->var.get() == v) {
        to->push_back(*it);
        from->erase(it);
        return true;
      }
    }
    return false;
  }

  void classify() {
    std::vector<IterVar> all = scope_->op->axes;
    all.insert(all.end(), scope_->op->reduce_axes.begin(), scope_->op->reduce_axes.end());
    for (const IterVar& iv : all) {
      if (const_extent(iv) == 1) continue;
      const bool ix = in(x_, iv), ik = in(k_, iv), io = is_axis(iv);
      if (ix && !ik && io) {
        xo_.push_back(iv);
      } else if (!ix && ik && io) {
        m_.conv.f.push_back(iv);
      } else if (ix && ik && !io) {
        xk_.push_back(iv);
      } else {
        ++mismatched_;
      }
    }
  }

  // X dims 0 and 1: one iterator of coefficient 1 (n from X/O, c from X/K) or the constant 0.
  void place_single(size_t dim, std::vector<IterVar>* from, std::vector<IterVar>* to) {
    auto aff = affine_index(x_->operands[dim]);
    if (!aff || aff->constant != 0 || aff->terms.size() > 1) {
      ++form_;
      return;
    }
    if (aff->terms.empty()) return;
    const auto& [v, c] = aff->terms[0];
    if (is_unit(v.get())) return;  // extent 1: the index is 0
    if (c != 1 || !move_to(from, v.get(), to)) ++form_;
  }

  void place_batch_and_channel() {
    place_single(0, &xo_, &m_.conv.n);
    place_single(1, &xk_, &m_.conv.c);
  }

  // X dim d = st * o + dil * r - pad with o from X/O and r from X/K (r optional). Returns
  // whether the dim has that form (each failure counts once in `form_`).
  bool place_spatial(size_t d, std::vector<IterVar>* o, std::vector<IterVar>* r) {
    m_.stride.push_back(1);
    m_.dilation.push_back(1);
    m_.padding.push_back(0);
    auto aff = affine_index(x_->operands[d]);
    if (!aff) {
      ++form_;
      return false;
    }
    bool ok = aff->constant <= 0;  // padding >= 0
    for (const auto& [v, c] : aff->terms) {
      if (is_unit(v.get())) continue;
      if (c > 0 && o->empty() && move_to(&xo_, v.get(), o)) {
        m_.stride.back() = c;
      } else if (c > 0 && r->empty() && move_to(&xk_, v.get(), r)) {
        m_.dilation.back() = c;
      } else {
        ok = false;
      }
    }
    ok = ok && !o->empty();
    m_.padding.back() = -aff->constant;
    if (!ok) ++form_;
    return ok;
  }

  // X's batch and channel dims must be the iterators' extents, and the output extents of the
  // well-formed spatial dims the convolution's over X as stored (one count per dim, so that
  // tightening a dim to its convolution extent lowers the distance).
  void check_extents() {
    const std::vector<int64_t> xs = const_shape(x_->tensor);
    if (xs[0] != extent_product(m_.conv.n)) ++form_;
    if (xs[1] != extent_product(m_.conv.c)) ++form_;
    const std::vector<IterVar>* outs[2] = {&m_.conv.oh, &m_.conv.ow};
    const std::vector<IterVar>* ks[2] = {&m_.conv.r, &m_.conv.s};
    for (int d = 0; d < 2; ++d) {
      if (!spatial_ok_[d]) continue;
      const int64_t span = m_.dilation[d] * (extent_product(*ks[d]) - 1) + 1;
      const int64_t expect = (xs[2 + d] + 2 * m_.padding[d] - span) / m_.stride[d] + 1;
      if (extent_product(*outs[d]) != expect) ++form_;
    }
  }

  void finish() {
    m_.kind = OperatorKind::kConv2d;
    m_.scope = scope_;
    m_.out_layout_free = !is_output(s_, scope_);
    // Output channels flattened in the order of their coefficients in the kernel read.
    if (auto fk = flatten_read(k_)) {
      std::stable_sort(m_.conv.f.begin(), m_.conv.f.end(), [&](const IterVar& a, const IterVar& b) {
        return std::abs(coef_of(fk->coef, a.var.get())) > std::abs(coef_of(fk->coef, b.var.get()));
      });
    }
    const ConvRoles& r = m_.conv;
    m_.conv.x_shape = const_shape(x_->tensor);
    m_.conv.w_shape = {extent_product(r.f), extent_product(r.c), extent_product(r.r),
                       extent_product(r.s)};
    m_.a = OperandLayout{x_->tensor, x_, {}, 0, false, 0};
    m_.b = OperandLayout{k_->tensor, k_, {}, 0, !reads_exactly(k_, {r.f, r.c, r.r, r.s}), 0};
    m_.out = OperandLayout{scope_, Expr(), {}, 0, false, 0};
    if (!m_.out_layout_free) {
      std::vector<Expr> axes = iter_exprs(scope_->op->axes);
      m_.out.needs_layout = !exact_dims(axes, {r.n, r.f, r.oh, r.ow});
    }
  }

  // The index list is the given single iterators in order (an empty role: 0 or an iterator of
  // extent 1).
  bool exact_dims(const std::vector<Expr>& idx, const std::vector<std::vector<IterVar>>& roles) {
    if (idx.size() != roles.size()) return false;
    for (size_t d = 0; d < idx.size(); ++d) {
      if (roles[d].size() > 1) return false;
      const bool zero = idx[d]->is_const_int(0) || (idx[d]->is_var() && is_unit(idx[d].get()));
      if (roles[d].empty() ? !zero : !idx[d].same_as(roles[d][0].var)) {
        return false;
      }
    }
    return true;
  }
  bool reads_exactly(const Expr& read, const std::vector<std::vector<IterVar>>& roles) {
    return exact_dims(read->operands, roles);
  }

  const State& s_;
  const Tensor& scope_;
  const Expr& x_;
  const Expr& k_;
  OperatorMatch m_;
  std::vector<IterVar> xo_, xk_;  // iterators of groups X/O and X/K not placed yet
  int mismatched_ = 0;
  int form_ = 0;
  bool spatial_ok_[2] = {false, false};
};

MatchOutcome match_conv(const State& s, const Tensor& scope) {
  auto reads = product_reads(scope);
  if (!reads) {
    MatchOutcome none;
    none.distance = DeriveConstants::kNoMatchDistance;
    return none;
  }
  MatchOutcome x = ConvMatcher(s, scope, reads->first, reads->second).run();
  MatchOutcome y = ConvMatcher(s, scope, reads->second, reads->first).run();
  return y.distance < x.distance ? y : x;
}

// w's coefficient in `index` when w appears only in a term c * w of its linear form (the other
// terms may be div, mod or products of other variables); 0 when w does not appear.
std::optional<int64_t> band_coefficient(const Expr& index, const ir::Var& w) {
  const ir::LinearForm f = ir::to_linear(index);
  if (f.invalid) return std::nullopt;
  int64_t coef = 0;
  for (const ir::LinearTerm& t : f.terms) {
    const bool just_w = t.atoms.size() == 1 && t.atoms[0].same_as(w);
    if (just_w) {
      coef = t.coef;
      continue;
    }
    for (const Expr& atom : t.atoms) {
      if (ir::uses_var(atom, w)) return std::nullopt;
    }
  }
  return coef;
}

// G2BMM with `i0` as I0 and `i1` as I1 (see matching.h): the band iterator and the distance.
MatchOutcome match_g2bmm_mapping(const Tensor& scope, const Expr& i0, const Expr& i1) {
  MatchOutcome best;
  best.distance = DeriveConstants::kNoMatchDistance;
  const ir::ComputeOpNode& op = *scope->op;
  bool shared_sum = false;  // k: a summation iterator both operands read
  for (const IterVar& r : op.reduce_axes)
    shared_sum |= ir::uses_var(i0, r.var) && ir::uses_var(i1, r.var);
  if (!shared_sum) return best;
  for (const IterVar& w : op.axes) {
    if (const_extent(w) < 2 || ir::uses_var(i0, w.var)) continue;
    int dim = -1;
    for (size_t d = 0; d < i1->operands.size(); ++d) {
      if (!ir::uses_var(i1->operands[d], w.var)) continue;
      dim = dim < 0 ? static_cast<int>(d) : -2;
    }
    if (dim < 0) continue;  // w not read by I1, or read in two dimensions
    const Expr& index = i1->operands[static_cast<size_t>(dim)];
    const std::optional<int64_t> coef = band_coefficient(index, w.var);
    if (!coef || *coef == 0) continue;
    bool row = false;  // the band moves with a traversal iterator of I0 (m)
    for (const IterVar& m : op.axes) {
      row |= !m.var.same_as(w.var) && ir::uses_var(index, m.var) && ir::uses_var(i0, m.var);
    }
    if (!row) continue;
    OperatorMatch m;
    m.kind = OperatorKind::kG2bmm;
    m.scope = scope;
    m.a.tensor = i0->tensor;
    m.a.access = i0;
    m.b.tensor = i1->tensor;
    m.b.access = i1;
    m.band_dim = dim;
    m.band_dilation = *coef;
    m.mismatched = std::abs(*coef) == 1 ? 0 : 1;
    if (m.mismatched < best.distance) {
      best.distance = m.mismatched;
      best.match = m;
    }
  }
  return best;
}

MatchOutcome match_g2bmm(const Tensor& scope) {
  MatchOutcome none;
  none.distance = DeriveConstants::kNoMatchDistance;
  auto reads = product_reads(scope);
  if (!reads || !has_const_extents(scope)) return none;
  MatchOutcome x = match_g2bmm_mapping(scope, reads->first, reads->second);
  MatchOutcome y = match_g2bmm_mapping(scope, reads->second, reads->first);
  return y.distance < x.distance ? y : x;
}

MatchOutcome match_elementwise(const Tensor& scope) {
  MatchOutcome res;
  const ir::ComputeOpNode& op = *scope->op;
  if (op.reduce != ir::ReduceKind::kNone) {
    res.distance = DeriveConstants::kNoMatchDistance;
    return res;
  }
  for (const Expr& a : accesses(op.body)) {
    bool identity = a->operands.size() == op.axes.size();
    for (size_t d = 0; identity && d < op.axes.size(); ++d) {
      identity = a->operands[d].same_as(op.axes[d].var);
    }
    if (!identity) ++res.distance;
  }
  if (res.distance == 0) {
    OperatorMatch m;
    m.kind = OperatorKind::kElementwise;
    m.scope = scope;
    res.match = m;
  }
  return res;
}

}  // namespace

MatchOutcome match_operator(const State& s, const Tensor& scope, OperatorKind kind,
                            const DeriveContext& ctx) {
  switch (kind) {
    case OperatorKind::kElementwise:
      return match_elementwise(scope);
    case OperatorKind::kMatmul:
    case OperatorKind::kBatchMatmul:
      return match_contraction(s, scope, kind, ctx);
    case OperatorKind::kConv2d:
      return match_conv(s, scope);
    case OperatorKind::kG2bmm:
      return match_g2bmm(scope);
  }
  return {};
}
}  // namespace tessera::derive
