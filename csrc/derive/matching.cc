#include "derive/matching.h"

#include <algorithm>
#include <unordered_map>

#include "derive/config.h"
#include "derive/index_analysis.h"

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
  }
  return "?";
}

const std::vector<OperatorKind>& table_operators() {
  static const std::vector<OperatorKind> kAll = {OperatorKind::kElementwise, OperatorKind::kMatmul,
                                                 OperatorKind::kBatchMatmul, OperatorKind::kConv2d};
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

// out[n, f, oh, ow] = sum(c, r, s) X[n, c, oh*st + r*dil - pad, ..] * K[f, c, r, s].
bool conv_pattern(const Tensor& scope, const Expr& x, const Expr& k, OperatorMatch* m) {
  const ir::ComputeOpNode& op = *scope->op;
  if (op.axes.size() != 4 || op.reduce_axes.size() != 3 || x->operands.size() != 4 ||
      k->operands.size() != 4) {
    return false;
  }
  auto is_var = [](const Expr& e, const IterVar& iv) { return e.same_as(iv.var); };
  const auto& ax = op.axes;
  const auto& rd = op.reduce_axes;
  if (!is_var(k->operands[0], ax[1]) || !is_var(k->operands[1], rd[0]) ||
      !is_var(k->operands[2], rd[1]) || !is_var(k->operands[3], rd[2])) {
    return false;
  }
  if (!is_var(x->operands[0], ax[0]) || !is_var(x->operands[1], rd[0])) return false;
  for (int d = 0; d < 2; ++d) {
    auto aff = affine_index(x->operands[2 + d]);
    if (!aff || aff->terms.size() != 2) return false;
    const int64_t st = aff->coef(ax[2 + d].var.get()), dil = aff->coef(rd[1 + d].var.get());
    if (st <= 0 || dil <= 0) return false;
    m->stride.push_back(st);
    m->dilation.push_back(dil);
    m->padding.push_back(-aff->constant);
  }
  m->a = OperandLayout{x->tensor, x, {}, 0, false, 0};
  m->b = OperandLayout{k->tensor, k, {}, 0, false, 0};
  return true;
}

MatchOutcome match_conv(const Tensor& scope) {
  MatchOutcome res;
  res.distance = DeriveConstants::kNoMatchDistance;
  auto reads = product_reads(scope);
  if (!reads) return res;
  OperatorMatch m;
  m.kind = OperatorKind::kConv2d;
  m.scope = scope;
  if (conv_pattern(scope, reads->first, reads->second, &m) ||
      conv_pattern(scope, reads->second, reads->first, &m)) {
    res.match = m;
    res.distance = 0;
  } else {
    res.distance = 1;  // a product under a sum that is not in conv2d's form
  }
  return res;
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
      return match_conv(scope);
  }
  return {};
}
}  // namespace tessera::derive
