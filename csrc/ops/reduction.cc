#include "ops/reduction.h"

#include <algorithm>

#include "ops/common.h"
#include "util/check.h"

namespace tessera::ops {

using ir::Expr;
using ir::Tensor;
using ir::Var;

namespace {

// Sorted, normalised, deduplicated-checked axes; empty input means all axes.
std::vector<int64_t> normalize_axes(const Tensor& x, const std::vector<int64_t>& axes,
                                    const std::string& op) {
  std::vector<int64_t> out;
  if (axes.empty()) {
    for (int64_t d = 0; d < x->ndim(); ++d) out.push_back(d);
    return out;
  }
  for (int64_t a : axes) {
    int64_t n = normalize_axis(a, x->ndim(), op);
    TESSERA_CHECK(std::find(out.begin(), out.end(), n) == out.end())
        << op << ": axis " << a << " listed twice";
    out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

Tensor reduce_axes(const Tensor& x, const std::vector<int64_t>& axes, bool keepdim,
                   ir::ReduceKind kind, const std::string& name) {
  TESSERA_CHECK(x != nullptr) << name << ": input is null";
  const std::vector<int64_t> red = normalize_axes(x, axes, name);
  std::vector<bool> is_red(x->ndim(), false);
  for (int64_t a : red) is_red[a] = true;

  Shape out_shape, red_ext;
  for (int d = 0; d < x->ndim(); ++d) {
    if (is_red[d]) {
      red_ext.push_back(x->shape[d]);
      if (keepdim) out_shape.push_back(ir::int_imm(1));
    } else {
      out_shape.push_back(x->shape[d]);
    }
  }
  return ir::reduce(
      name, out_shape, red_ext, kind,
      [&](const std::vector<Var>& o, const std::vector<Var>& r) {
        std::vector<Expr> idx;
        size_t oi = 0, ri = 0;
        for (int d = 0; d < x->ndim(); ++d) {
          if (is_red[d]) {
            idx.push_back(r[ri++]);
            if (keepdim) ++oi;  // the extent-1 output dim is not used for indexing
          } else {
            idx.push_back(o[oi++]);
          }
        }
        return ir::access(x, idx);
      },
      "reduce");
}

Tensor reduce_sum(const Tensor& x, const std::vector<int64_t>& axes, bool keepdim,
                  const std::string& name) {
  return reduce_axes(x, axes, keepdim, ir::ReduceKind::kSum, name);
}

Tensor reduce_max(const Tensor& x, const std::vector<int64_t>& axes, bool keepdim,
                  const std::string& name) {
  return reduce_axes(x, axes, keepdim, ir::ReduceKind::kMax, name);
}

Tensor reduce_min(const Tensor& x, const std::vector<int64_t>& axes, bool keepdim,
                  const std::string& name) {
  return reduce_axes(x, axes, keepdim, ir::ReduceKind::kMin, name);
}

Tensor reduce_mean(const Tensor& x, const std::vector<int64_t>& axes, bool keepdim,
                   const std::string& name) {
  TESSERA_CHECK(x != nullptr) << name << ": input is null";
  TESSERA_CHECK(ir::is_float(x->dtype))
      << name << ": mean needs a float input, " << x->name << " is " << ir::dtype_name(x->dtype);
  Tensor sum = reduce_axes(x, axes, keepdim, ir::ReduceKind::kSum, name + "_sum");
  Expr count = ir::int_imm(1);
  for (int64_t a : normalize_axes(x, axes, name)) count = count * x->shape[a];
  return ir::compute(
      name, sum->shape,
      [&](const std::vector<Var>& o) {
        return ir::div(ir::access(sum, {o.begin(), o.end()}), ir::cast(x->dtype, count));
      },
      "elementwise");
}

}  // namespace tessera::ops
