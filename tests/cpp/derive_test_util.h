#pragma once
// Helpers of the derivation tests: EinNet-style definitions (zero padding implicit: reads
// outside a shape give 0) and numeric comparison of states on random inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "derive/expressions.h"
#include "derive/matching.h"
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

// EinNet-form definitions (derive/expressions.h), under the names the tests use.
inline Tensor conv2d(const Tensor& x, const Tensor& k, int64_t stride, int64_t pad, int64_t dil,
                     const std::string& name = "conv") {
  return derive::conv2d_expr(x, k, stride, pad, dil, name);
}
inline Tensor conv_transpose2d(const Tensor& x, const Tensor& k, int64_t stride, int64_t pad) {
  return derive::conv_transpose2d_expr(x, k, stride, pad);
}
inline Tensor g2bmm(const Tensor& a, const Tensor& b, int64_t half, int64_t dilation) {
  return derive::g2bmm_expr(a, b, half, dilation);
}

// A derivation context whose weights are the placeholders of `s` called `name`.
inline derive::DeriveContext weights_named(const State& s, const std::string& name) {
  derive::DeriveContext ctx;
  for (const Tensor& p : ir::collect_dag(s.outputs).placeholders) {
    if (p->name == name) ctx.weights.insert(p.get());
  }
  return ctx;
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
