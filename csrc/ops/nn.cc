#include "ops/nn.h"

#include "ops/common.h"
#include "ops/reduction.h"
#include "util/check.h"

namespace tessera::ops {

using ir::Expr;
using ir::Tensor;
using ir::Var;

namespace {

// Index of a tensor reduced over `axis` (keepdim = false) from a full index.
std::vector<Expr> drop_axis(const std::vector<Var>& idx, int64_t axis) {
  std::vector<Expr> out;
  for (size_t d = 0; d < idx.size(); ++d) {
    if (static_cast<int64_t>(d) != axis) out.push_back(idx[d]);
  }
  return out;
}

void check_float(const Tensor& x, const std::string& op) {
  TESSERA_CHECK(x != nullptr) << op << ": input is null";
  TESSERA_CHECK(ir::is_float(x->dtype))
      << op << ": needs a float input, " << x->name << " is " << ir::dtype_name(x->dtype);
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t axis, const std::string& name) {
  check_float(x, name);
  const int64_t ax = normalize_axis(axis, x->ndim(), name);
  Tensor mx = reduce_axes(x, {ax}, false, ir::ReduceKind::kMax, name + "_max");
  Tensor e = ir::compute(
      name + "_exp", x->shape,
      [&](const std::vector<Var>& v) {
        return ir::exp(ir::access(x, {v.begin(), v.end()}) - ir::access(mx, drop_axis(v, ax)));
      },
      "elementwise");
  Tensor sum = reduce_axes(e, {ax}, false, ir::ReduceKind::kSum, name + "_sum");
  return ir::compute(
      name, x->shape,
      [&](const std::vector<Var>& v) {
        return ir::div(ir::access(e, {v.begin(), v.end()}), ir::access(sum, drop_axis(v, ax)));
      },
      "elementwise");
}

Tensor log_softmax(const Tensor& x, int64_t axis, const std::string& name) {
  check_float(x, name);
  const int64_t ax = normalize_axis(axis, x->ndim(), name);
  Tensor mx = reduce_axes(x, {ax}, false, ir::ReduceKind::kMax, name + "_max");
  // sum(k) exp(x[.., k, ..] - max[..]): the reduction reads both x and the max.
  Shape sum_shape = mx->shape;
  Tensor sum = ir::reduce(
      name + "_sum", sum_shape, {x->shape[ax]}, ir::ReduceKind::kSum,
      [&](const std::vector<Var>& o, const std::vector<Var>& r) {
        std::vector<Expr> idx(o.begin(), o.end());
        idx.insert(idx.begin() + ax, r[0]);
        return ir::exp(ir::access(x, idx) - ir::access(mx, {o.begin(), o.end()}));
      },
      "reduce");
  return ir::compute(
      name, x->shape,
      [&](const std::vector<Var>& v) {
        std::vector<Expr> rest = drop_axis(v, ax);
        return ir::access(x, {v.begin(), v.end()}) - ir::access(mx, rest) -
               ir::log(ir::access(sum, rest));
      },
      "elementwise");
}

Tensor layer_norm(const Tensor& x, int64_t normalized_ndim, const Tensor& gamma, const Tensor& beta,
                  double eps, const std::string& name) {
  check_float(x, name);
  const int nd = x->ndim();
  TESSERA_CHECK(normalized_ndim >= 1 && normalized_ndim <= nd)
      << name << ": normalized_ndim must be in [1, " << nd << "], got " << normalized_ndim;
  const int lead = nd - static_cast<int>(normalized_ndim);  // dims that keep their own statistics
  const Shape norm_shape(x->shape.begin() + lead, x->shape.end());
  for (const Tensor* p : {&gamma, &beta}) {
    if (!*p) continue;
    const std::string what = p == &gamma ? "gamma" : "beta";
    check_same_dtype(x, *p, name);
    TESSERA_CHECK((*p)->ndim() == normalized_ndim)
        << name << ": " << what << shape_str((*p)->shape) << " must have the normalized shape "
        << shape_str(norm_shape);
    for (int d = 0; d < normalized_ndim; ++d) {
      check_dims_equal((*p)->shape[d], norm_shape[d],
                       name + ": " + what + shape_str((*p)->shape) +
                           " must have the normalized shape " + shape_str(norm_shape));
    }
  }
  std::vector<int64_t> axes;
  for (int d = lead; d < nd; ++d) axes.push_back(d);
  const Expr count = ir::cast(x->dtype, shape_numel(norm_shape));
  auto lead_index = [&](const std::vector<Var>& v) {
    return std::vector<Expr>(v.begin(), v.begin() + lead);
  };
  auto full_index = [](const std::vector<Var>& v) { return std::vector<Expr>(v.begin(), v.end()); };

  Tensor sum = reduce_axes(x, axes, false, ir::ReduceKind::kSum, name + "_sum");
  Tensor mean = ir::compute(
      name + "_mean", sum->shape,
      [&](const std::vector<Var>& v) { return ir::div(ir::access(sum, full_index(v)), count); },
      "elementwise");
  Tensor var_sum = ir::reduce(
      name + "_var_sum", sum->shape, norm_shape, ir::ReduceKind::kSum,
      [&](const std::vector<Var>& o, const std::vector<Var>& r) {
        std::vector<Expr> idx(o.begin(), o.end());
        idx.insert(idx.end(), r.begin(), r.end());
        Expr diff = ir::access(x, idx) - ir::access(mean, full_index(o));
        return diff * diff;
      },
      "reduce");
  Tensor rstd = ir::compute(
      name + "_rstd", sum->shape,
      [&](const std::vector<Var>& v) {
        Expr variance = ir::div(ir::access(var_sum, full_index(v)), count);
        return ir::call(ir::CallOp::kRsqrt, {variance + ir::float_imm(eps, x->dtype)});
      },
      "elementwise");
  return ir::compute(
      name, x->shape,
      [&](const std::vector<Var>& v) {
        Expr y = (ir::access(x, full_index(v)) - ir::access(mean, lead_index(v))) *
                 ir::access(rstd, lead_index(v));
        std::vector<Expr> norm_idx(v.begin() + lead, v.end());
        if (gamma) y = y * ir::access(gamma, norm_idx);
        if (beta) y = y + ir::access(beta, norm_idx);
        return y;
      },
      "elementwise");
}

}  // namespace tessera::ops
