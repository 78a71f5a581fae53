#include "derive/lower.h"

#include "ir/simplify.h"
#include "ops/conv.h"
#include "ops/linalg.h"
#include "util/check.h"

namespace tessera::derive {

using ir::Expr;
using ir::IterVar;
using ir::Tensor;

namespace {

// Iterators of a role from its flat index q: i_j = (q / prod(extents after j)) % extent_j.
void unflatten(const std::vector<IterVar>& order, const Expr& q, ir::VarMap* vmap) {
  int64_t inner = 1;
  for (size_t j = order.size(); j-- > 0;) {
    Expr v = inner == 1 ? q : ir::floordiv(q, ir::int_imm(inner));
    if (j > 0) v = ir::floormod(v, ir::int_imm(const_extent(order[j])));
    (*vmap)[order[j].var.get()] = v;
    inner *= const_extent(order[j]);
  }
}

// Flat index of a role from its iterators (as mapped by `vmap`).
Expr flatten(const std::vector<IterVar>& order, const ir::VarMap& vmap) {
  Expr e = ir::int_imm(0);
  for (const IterVar& iv : order) {
    e = e * ir::int_imm(const_extent(iv)) + vmap.at(iv.var.get());
  }
  return ir::simplify(e);
}

// Iterators of the scope that belong to no role (extent 1) read index 0.
void zero_unit_iterators(const Tensor& scope, ir::VarMap* vmap) {
  for (const auto* ivs : {&scope->op->axes, &scope->op->reduce_axes}) {
    for (const IterVar& iv : *ivs) {
      if (const_extent(iv) == 1) (*vmap)[iv.var.get()] = ir::int_imm(0);
    }
  }
}

// [batch?, r1, r2] view of a read: the read with its iterators recovered from flat indices.
Tensor operand_view(const std::string& name, const Expr& read, bool batched,
                    const std::vector<IterVar>& batch, const std::vector<IterVar>& r1,
                    const std::vector<IterVar>& r2, const Tensor& scope) {
  std::vector<Expr> shape;
  if (batched) shape.push_back(ir::int_imm(extent_product(batch)));
  shape.push_back(ir::int_imm(extent_product(r1)));
  shape.push_back(ir::int_imm(extent_product(r2)));
  return ir::compute(
      name, shape,
      [&](const std::vector<ir::Var>& q) {
        ir::VarMap vmap;
        zero_unit_iterators(scope, &vmap);
        const size_t o = batched ? 1 : 0;
        if (batched) unflatten(batch, q[0], &vmap);
        unflatten(r1, q[o], &vmap);
        unflatten(r2, q[o + 1], &vmap);
        return substitute_body(read, vmap);
      },
      "layout");
}

}  // namespace

namespace {

// ops::conv2d over X as stored and W'[F, C, R, S] = the kernel read with the output-channel
// group recovered from F's flat index (a layout eOperator, compile-time for weights).
Tensor lower_conv(const OperatorMatch& m) {
  const Tensor& scope = m.scope;
  const ConvRoles& r = m.conv;
  std::vector<Expr> wshape;
  for (int64_t d : r.w_shape) wshape.push_back(ir::int_imm(d));
  Tensor w = ir::compute(
      scope->name + "_W", wshape,
      [&](const std::vector<ir::Var>& q) {
        ir::VarMap vmap;
        zero_unit_iterators(scope, &vmap);
        unflatten(r.f, q[0], &vmap);
        unflatten(r.c, q[1], &vmap);
        unflatten(r.r, q[2], &vmap);
        unflatten(r.s, q[3], &vmap);
        return substitute_body(m.b.access, vmap);
      },
      "layout");
  Tensor y =
      ops::conv2d(m.a.tensor, w, nullptr, {m.stride[0], m.stride[1]}, {m.padding[0], m.padding[1]},
                  {m.dilation[0], m.dilation[1]}, 1, scope->name + "_conv");
  ir::VarMap vmap;
  std::vector<IterVar> axes = fresh_copies(scope->op->axes, &vmap);
  zero_unit_iterators(scope, &vmap);
  std::vector<Expr> idx = {flatten(r.n, vmap), flatten(r.f, vmap), flatten(r.oh, vmap),
                           flatten(r.ow, vmap)};
  return make_scope(scope->name, axes, {}, ir::ReduceKind::kNone, ir::access(y, idx), "layout",
                    scope->pad_value);
}

}  // namespace

Tensor lower_match(const OperatorMatch& m) {
  if (m.kind == OperatorKind::kConv2d) return lower_conv(m);
  TESSERA_CHECK(m.kind == OperatorKind::kMatmul || m.kind == OperatorKind::kBatchMatmul)
      << "derive: lower_match handles matmul-like and conv2d matches, not "
      << operator_kind_name(m.kind);
  TESSERA_CHECK(m.mismatched == 0 && m.a.padded_dims == 0 && m.b.padded_dims == 0)
      << "derive: lower_match needs a match at distance 0";
  const bool batched = m.kind == OperatorKind::kBatchMatmul;
  const Tensor& scope = m.scope;
  Tensor a = operand_view(scope->name + "_A", m.a.access, batched, m.batch, m.m, m.k, scope);
  Tensor b = operand_view(scope->name + "_B", m.b.access, batched, m.batch, m.k, m.n, scope);
  Tensor c = batched ? ops::batch_matmul(a, b, false, false, scope->name + "_bmm")
                     : ops::matmul(a, b, false, false, scope->name + "_mm");
  ir::VarMap vmap;
  std::vector<IterVar> axes = fresh_copies(scope->op->axes, &vmap);
  zero_unit_iterators(scope, &vmap);
  std::vector<Expr> idx;
  if (batched) idx.push_back(flatten(m.batch, vmap));
  idx.push_back(flatten(m.m, vmap));
  idx.push_back(flatten(m.n, vmap));
  return make_scope(scope->name, axes, {}, ir::ReduceKind::kNone, ir::access(c, idx), "layout",
                    scope->pad_value);
}

}  // namespace tessera::derive
