#pragma once
// Helpers of the derivation tests: EinNet-style definitions (zero padding implicit: reads
// outside a shape give 0) and numeric comparison of states on random inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "derive/state.h"
#include "ir/tensor.h"
#include "runtime/ndarray.h"

namespace tessera::derivetest {

using derive::State;
using ir::Expr;
using ir::Tensor;
using ir::Var;
using runtime::NDArray;

inline std::vector<Expr> dims(const std::vector<int64_t>& d) {
  std::vector<Expr> out;
  for (int64_t v : d) out.push_back(ir::int_imm(v));
  return out;
}

// O[n, f, h, w] = sum(c, r, s) X[n, c, h*stride + r*dil - pad, w*stride + s*dil - pad] *
// K[f, c, r, s], zero padding implicit (NCHW / OIHW, as torch).
inline Tensor conv2d(const Tensor& x, const Tensor& k, int64_t stride, int64_t pad, int64_t dil,
                     const std::string& name = "conv") {
  const int64_t n = x->shape[0]->int_value, c = x->shape[1]->int_value;
  const int64_t h = x->shape[2]->int_value, w = x->shape[3]->int_value;
  const int64_t f = k->shape[0]->int_value, kr = k->shape[2]->int_value;
  const int64_t ks = k->shape[3]->int_value;
  const int64_t oh = (h + 2 * pad - dil * (kr - 1) - 1) / stride + 1;
  const int64_t ow = (w + 2 * pad - dil * (ks - 1) - 1) / stride + 1;
  return ir::reduce(
      name, dims({n, f, oh, ow}), dims({c, kr, ks}), ir::ReduceKind::kSum,
      [&](const std::vector<Var>& v, const std::vector<Var>& r) {
        Expr ih = v[2] * ir::int_imm(stride) + r[1] * ir::int_imm(dil) - ir::int_imm(pad);
        Expr iw = v[3] * ir::int_imm(stride) + r[2] * ir::int_imm(dil) - ir::int_imm(pad);
        return ir::access(x, {v[0], r[0], ih, iw}) * ir::access(k, {v[1], r[0], r[1], r[2]});
      },
      "conv2d");
}

// torch's conv_transpose2d (X[N, C, H, W], K[C, F, R, S], one group, no output padding) as a
// sum over input positions: O[n, f, oh, ow] = sum(c, ih, iw) X[n, c, ih, iw] *
// K[c, f, oh + pad - ih*stride, ow + pad - iw*stride], kernel reads outside K giving 0.
inline Tensor conv_transpose2d(const Tensor& x, const Tensor& k, int64_t stride, int64_t pad) {
  const int64_t n = x->shape[0]->int_value, c = x->shape[1]->int_value;
  const int64_t h = x->shape[2]->int_value, w = x->shape[3]->int_value;
  const int64_t f = k->shape[1]->int_value, kr = k->shape[2]->int_value;
  const int64_t ks = k->shape[3]->int_value;
  const int64_t oh = (h - 1) * stride - 2 * pad + kr, ow = (w - 1) * stride - 2 * pad + ks;
  return ir::reduce(
      "convT", dims({n, f, oh, ow}), dims({c, h, w}), ir::ReduceKind::kSum,
      [&](const std::vector<Var>& v, const std::vector<Var>& r) {
        Expr kh = v[2] + ir::int_imm(pad) - r[1] * ir::int_imm(stride);
        Expr kw = v[3] + ir::int_imm(pad) - r[2] * ir::int_imm(stride);
        return ir::access(x, {v[0], r[0], r[1], r[2]}) * ir::access(k, {r[0], v[1], kh, kw});
      },
      "conv_transpose2d");
}

// Longformer's dilated band product (G2BMM): O[b, m, w] = sum(k) A[b, m, k] *
// B[b, m + dilation * (w - half), k] for w in [0, 2*half + 1), reads outside B giving 0.
inline Tensor g2bmm(const Tensor& a, const Tensor& b, int64_t half, int64_t dilation) {
  const int64_t bt = a->shape[0]->int_value, m = a->shape[1]->int_value;
  const int64_t k = a->shape[2]->int_value;
  return ir::reduce(
      "g2bmm", dims({bt, m, 2 * half + 1}), dims({k}), ir::ReduceKind::kSum,
      [&](const std::vector<Var>& v, const std::vector<Var>& r) {
        Expr row = v[1] + ir::int_imm(dilation) * (v[2] - ir::int_imm(half));
        return ir::access(a, {v[0], v[1], r[0]}) * ir::access(b, {v[0], row, r[0]});
      },
      "g2bmm");
}

inline State conv_state(int64_t n, int64_t c, int64_t h, int64_t w, int64_t f, int64_t kernel,
                        int64_t pad) {
  Tensor x = ir::placeholder("X", dims({n, c, h, w}));
  Tensor k = ir::placeholder("K", dims({f, c, kernel, kernel}));
  return State{{conv2d(x, k, 1, pad, 1)}, {}};
}

// Random inputs in [-1, 1] for every placeholder of the state (float64, so comparisons see the
// derivation's error, not fp32 rounding).
inline std::map<const ir::TensorNode*, NDArray> random_inputs(const State& s, uint64_t seed) {
  std::map<const ir::TensorNode*, NDArray> in;
  for (const Tensor& p : ir::collect_dag(s.outputs).placeholders) {
    std::vector<int64_t> shape = derive::const_shape(p);
    NDArray a = NDArray::random(ir::DType::kFloat64, shape, seed++);
    in.emplace(p.get(), a.astype(p->dtype));
  }
  return in;
}

// max |a - b| / max |b| over all outputs (a norm-wise relative error: elementwise ratios blow
// up where the true value is near 0).
inline double max_rel_error(const std::vector<NDArray>& a, const std::vector<NDArray>& b) {
  double diff = 0.0, scale = 0.0;
  EXPECT_EQ(a.size(), b.size());
  for (size_t o = 0; o < std::min(a.size(), b.size()); ++o) {
    EXPECT_EQ(a[o].shape, b[o].shape);
    if (a[o].shape != b[o].shape) return INFINITY;
    for (int64_t i = 0; i < b[o].numel(); ++i) {
      diff = std::max(diff, std::abs(a[o].get(i) - b[o].get(i)));
      scale = std::max(scale, std::abs(b[o].get(i)));
    }
  }
  return scale > 0 ? diff / scale : diff;
}

// Relative error of `derived` against `original` on random inputs.
inline double state_error(const State& derived, const State& original, uint64_t seed = 7) {
  auto in = random_inputs(original, seed);
  return max_rel_error(derive::evaluate_state(derived, in), derive::evaluate_state(original, in));
}

constexpr double kTolerance = 1e-4;  // the bound on the max relative error

}  // namespace tessera::derivetest
