#include "ops/linalg.h"

#include "ops/common.h"
#include "util/check.h"

namespace tessera::ops {

using ir::Expr;
using ir::Tensor;
using ir::Var;

namespace {
std::map<std::string, std::string> trans_attrs(bool trans_a, bool trans_b) {
  return {{"trans_a", trans_a ? "1" : "0"}, {"trans_b", trans_b ? "1" : "0"}};
}
}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b,
              const std::string& name) {
  check_ndim(a, 2, "matmul", "A");
  check_ndim(b, 2, "matmul", "B");
  check_same_dtype(a, b, "matmul");
  const Expr m = a->shape[trans_a ? 1 : 0];
  const Expr k = a->shape[trans_a ? 0 : 1];
  const Expr kb = b->shape[trans_b ? 1 : 0];
  const Expr n = b->shape[trans_b ? 0 : 1];
  check_dims_equal(k, kb,
                   "matmul: reduction dims differ (A" + shape_str(a->shape) + " vs B" +
                       shape_str(b->shape) + (trans_a || trans_b ? ", with transposes" : "") + ")");
  return reduce_named(
      name, {m, n}, {"i", "j"}, {k}, {"k"}, ir::ReduceKind::kSum,
      [&](const std::vector<Var>& o, const std::vector<Var>& r) {
        Expr av = trans_a ? ir::access(a, {r[0], o[0]}) : ir::access(a, {o[0], r[0]});
        Expr bv = trans_b ? ir::access(b, {o[1], r[0]}) : ir::access(b, {r[0], o[1]});
        return av * bv;
      },
      "matmul", trans_attrs(trans_a, trans_b));
}

Tensor batch_matmul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b,
                    const std::string& name) {
  check_ndim(a, 3, "batch_matmul", "A");
  check_ndim(b, 3, "batch_matmul", "B");
  check_same_dtype(a, b, "batch_matmul");
  check_dims_equal(a->shape[0], b->shape[0],
                   "batch_matmul: batch dims differ (A" + shape_str(a->shape) + " vs B" +
                       shape_str(b->shape) + ")");
  const Expr m = a->shape[trans_a ? 2 : 1];
  const Expr k = a->shape[trans_a ? 1 : 2];
  const Expr kb = b->shape[trans_b ? 2 : 1];
  const Expr n = b->shape[trans_b ? 1 : 2];
  check_dims_equal(k, kb,
                   "batch_matmul: reduction dims differ (A" + shape_str(a->shape) + " vs B" +
                       shape_str(b->shape) + (trans_a || trans_b ? ", with transposes" : "") + ")");
  return reduce_named(
      name, {a->shape[0], m, n}, {"b", "i", "j"}, {k}, {"k"}, ir::ReduceKind::kSum,
      [&](const std::vector<Var>& o, const std::vector<Var>& r) {
        Expr av = trans_a ? ir::access(a, {o[0], r[0], o[1]}) : ir::access(a, {o[0], o[1], r[0]});
        Expr bv = trans_b ? ir::access(b, {o[0], o[2], r[0]}) : ir::access(b, {o[0], r[0], o[2]});
        return av * bv;
      },
      "batch_matmul", trans_attrs(trans_a, trans_b));
}

Tensor dense(const Tensor& x, const Tensor& w, const Tensor& bias, const std::string& name) {
  check_ndim(x, 2, "dense", "X");
  check_ndim(w, 2, "dense", "W");
  check_same_dtype(x, w, "dense");
  check_dims_equal(x->shape[1], w->shape[1],
                   "dense: in_features differ (X" + shape_str(x->shape) + " vs W" +
                       shape_str(w->shape) + ", W is [out_features, in_features])");
  Tensor y = reduce_named(
      name, {x->shape[0], w->shape[0]}, {"i", "j"}, {x->shape[1]}, {"k"}, ir::ReduceKind::kSum,
      [&](const std::vector<Var>& o, const std::vector<Var>& r) {
        return ir::access(x, {o[0], r[0]}) * ir::access(w, {o[1], r[0]});
      },
      "dense");
  if (!bias) return y;
  check_ndim(bias, 1, "dense", "bias");
  check_same_dtype(x, bias, "dense");
  check_dims_equal(bias->shape[0], w->shape[0],
                   "dense: bias" + shape_str(bias->shape) + " does not match out_features of W" +
                       shape_str(w->shape));
  return compute_named(name + "_bias", y->shape, {"i", "j"},
                       [&](const std::vector<Var>& o) {
                         return ir::access(y, {o[0], o[1]}) + ir::access(bias, {o[1]});
                       },
                       "elementwise", {{"epilogue", "bias_add"}});
}

}  // namespace tessera::ops
