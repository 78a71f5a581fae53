#include "derive/expressions.h"

#include <vector>

namespace tessera::derive {

namespace {

std::vector<ir::Expr> int_dims(const std::vector<int64_t>& d) {
  std::vector<ir::Expr> out;
  for (int64_t v : d) out.push_back(ir::int_imm(v));
  return out;
}

}  // namespace

ir::Tensor conv2d_expr(const ir::Tensor& x, const ir::Tensor& k, int64_t stride, int64_t pad,
                       int64_t dil, const std::string& name) {
  const int64_t n = x->shape[0]->int_value, c = x->shape[1]->int_value;
  const int64_t h = x->shape[2]->int_value, w = x->shape[3]->int_value;
  const int64_t f = k->shape[0]->int_value, kr = k->shape[2]->int_value;
  const int64_t ks = k->shape[3]->int_value;
  const int64_t oh = (h + 2 * pad - dil * (kr - 1) - 1) / stride + 1;
  const int64_t ow = (w + 2 * pad - dil * (ks - 1) - 1) / stride + 1;
  return ir::reduce(
      name, int_dims({n, f, oh, ow}), int_dims({c, kr, ks}), ir::ReduceKind::kSum,
      [&](const std::vector<ir::Var>& v, const std::vector<ir::Var>& r) {
        ir::Expr ih = v[2] * ir::int_imm(stride) + r[1] * ir::int_imm(dil) - ir::int_imm(pad);
        ir::Expr iw = v[3] * ir::int_imm(stride) + r[2] * ir::int_imm(dil) - ir::int_imm(pad);
        return ir::access(x, {v[0], r[0], ih, iw}) * ir::access(k, {v[1], r[0], r[1], r[2]});
      },
      "conv2d");
}

ir::Tensor conv_transpose2d_expr(const ir::Tensor& x, const ir::Tensor& k, int64_t stride,
                                 int64_t pad) {
  const int64_t n = x->shape[0]->int_value, c = x->shape[1]->int_value;
  const int64_t h = x->shape[2]->int_value, w = x->shape[3]->int_value;
  const int64_t f = k->shape[1]->int_value, kr = k->shape[2]->int_value;
  const int64_t ks = k->shape[3]->int_value;
  const int64_t oh = (h - 1) * stride - 2 * pad + kr, ow = (w - 1) * stride - 2 * pad + ks;
  return ir::reduce(
      "convT", int_dims({n, f, oh, ow}), int_dims({c, h, w}), ir::ReduceKind::kSum,
      [&](const std::vector<ir::Var>& v, const std::vector<ir::Var>& r) {
        ir::Expr kh = v[2] + ir::int_imm(pad) - r[1] * ir::int_imm(stride);
        ir::Expr kw = v[3] + ir::int_imm(pad) - r[2] * ir::int_imm(stride);
        return ir::access(x, {v[0], r[0], r[1], r[2]}) * ir::access(k, {r[0], v[1], kh, kw});
      },
      "conv_transpose2d");
}

ir::Tensor g2bmm_expr(const ir::Tensor& a, const ir::Tensor& b, int64_t half, int64_t dilation,
                      bool b_k_major) {
  const int64_t bt = a->shape[0]->int_value, m = a->shape[1]->int_value;
  const int64_t k = a->shape[2]->int_value;
  return ir::reduce(
      "g2bmm", int_dims({bt, m, 2 * half + 1}), int_dims({k}), ir::ReduceKind::kSum,
      [&](const std::vector<ir::Var>& v, const std::vector<ir::Var>& r) {
        ir::Expr row = v[1] + ir::int_imm(dilation) * (v[2] - ir::int_imm(half));
        const ir::Expr b_read =
            b_k_major ? ir::access(b, {v[0], r[0], row}) : ir::access(b, {v[0], row, r[0]});
        return ir::access(a, {v[0], v[1], r[0]}) * b_read;
      },
      "g2bmm");
}

}  // namespace tessera::derive
