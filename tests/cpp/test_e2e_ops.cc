// Every operator the foundation supports, compiled with its default schedule through the LLVM
// JIT (and, for small cases, the loop-IR interpreter), checked against the reference interpreter.
#include "const_dims.h"
#include "e2e_harness.h"
#include "ops/ops.h"

namespace tessera::testing {
namespace {

using ir::Expr;
using ir::placeholder;
using ir::Tensor;

void check_both(const Graph& g, Tolerance tol = {}) {
  check_graph(g, std::nullopt, /*use_jit=*/true, tol);
  check_graph(g, std::nullopt, /*use_jit=*/false, tol);
}

TEST(E2EOps, MatmulShapes) {
  for (auto [m, n, k] : std::vector<std::array<int64_t, 3>>{{1, 1, 1},
                                                            {13, 37, 21},
                                                            {64, 64, 64},
                                                            {96, 130, 257},
                                                            {3, 200, 5},
                                                            {14, 64, 33},
                                                            {100, 128, 70}}) {
    Tensor a = placeholder("A", dims({m, k})), b = placeholder("B", dims({k, n}));
    check_graph({{ops::matmul(a, b)}, {a, b}}, std::nullopt, true, {1e-4, 1e-4});
  }
  Tensor a = placeholder("A", dims({13, 21})), b = placeholder("B", dims({21, 37}));
  check_graph({{ops::matmul(a, b)}, {a, b}}, std::nullopt, false);
}

TEST(E2EOps, MatmulTransposed) {
  Tensor at = placeholder("At", dims({33, 20})), b = placeholder("B", dims({33, 48}));
  check_both({{ops::matmul(at, b, true, false)}, {at, b}});
  Tensor a = placeholder("A", dims({20, 33})), bt = placeholder("Bt", dims({48, 33}));
  check_both({{ops::matmul(a, bt, false, true)}, {a, bt}});
  check_graph({{ops::matmul(at, bt, true, true)}, {at, bt}}, std::nullopt, true);
}

TEST(E2EOps, BatchMatmul) {
  Tensor a = placeholder("A", dims({3, 17, 20})), b = placeholder("B", dims({3, 20, 33}));
  check_both({{ops::batch_matmul(a, b)}, {a, b}});
  Tensor bt = placeholder("Bt", dims({3, 33, 20}));
  check_graph({{ops::batch_matmul(a, bt, false, true)}, {a, bt}}, std::nullopt, true);
}

TEST(E2EOps, DenseWithBiasAndReluEpilogue) {
  Tensor x = placeholder("X", dims({10, 70})), w = placeholder("W", dims({40, 70}));
  Tensor bias = placeholder("bias", dims({40}));
  Tensor y = ops::relu(ops::dense(x, w, bias));
  check_both({{y}, {x, w, bias}});
  // Epilogue fused: one stage.
  EXPECT_EQ(schedule::plan_stages({y}, {x, w, bias}).stages.size(), 1u);
}

TEST(E2EOps, Conv2dVariants) {
  struct C {
    int64_t n, c, h, w, o, kh, kw;
    ops::Int2 stride, pad, dil;
    int64_t groups;
  };
  for (const C& p : std::vector<C>{{1, 3, 9, 9, 4, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1},
                                   {2, 4, 10, 11, 6, 3, 2, {2, 1}, {0, 1}, {1, 1}, 1},
                                   {1, 4, 12, 12, 4, 3, 3, {1, 1}, {2, 2}, {2, 2}, 2},
                                   {1, 8, 9, 9, 8, 3, 3, {2, 2}, {1, 1}, {1, 1}, 8},
                                   {1, 16, 7, 20, 32, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1}}) {
    Tensor x = placeholder("X", dims({p.n, p.c, p.h, p.w}));
    Tensor w = placeholder("W", dims({p.o, p.c / p.groups, p.kh, p.kw}));
    Tensor b = placeholder("b", dims({p.o}));
    check_graph({{ops::conv2d(x, w, b, p.stride, p.pad, p.dil, p.groups)}, {x, w, b}}, std::nullopt,
                true);
  }
  Tensor x = placeholder("X", dims({1, 2, 5, 5})), w = placeholder("W", dims({3, 2, 3, 3}));
  check_graph({{ops::conv2d(x, w, nullptr, {1, 1}, {1, 1})}, {x, w}}, std::nullopt, false);
}

TEST(E2EOps, ConvTranspose2d) {
  Tensor x = placeholder("X", dims({1, 4, 5, 6})), w = placeholder("W", dims({4, 3, 3, 3}));
  Tensor b = placeholder("b", dims({3}));
  check_both({{ops::conv_transpose2d(x, w, b, {2, 2}, {1, 1}, {1, 0})}, {x, w, b}});
  Tensor wg = placeholder("Wg", dims({4, 2, 2, 3}));
  check_graph({{ops::conv_transpose2d(x, wg, nullptr, {1, 2}, {0, 1}, {0, 1}, {2, 1}, 2)}, {x, wg}},
              std::nullopt, true);
}

TEST(E2EOps, Pooling) {
  Tensor x = placeholder("X", dims({2, 3, 11, 10}));
  check_both({{ops::avg_pool2d(x, {2, 2})}, {x}});
  check_graph({{ops::avg_pool2d(x, {3, 3}, {2, 2}, {1, 1}, true, false)}, {x}}, std::nullopt, true);
  check_both({{ops::max_pool2d(x, {3, 3}, {2, 2}, {1, 1})}, {x}});
  check_graph({{ops::max_pool2d(x, {2, 3}, {2, 2}, {0, 1}, {2, 1}, true)}, {x}}, std::nullopt,
              true);
}

TEST(E2EOps, Reductions) {
  Tensor x = placeholder("X", dims({6, 35, 9}));
  for (std::vector<int64_t> axes :
       std::vector<std::vector<int64_t>>{{0}, {1}, {-1}, {0, 2}, {1, 2}, {}}) {
    check_graph({{ops::reduce_sum(x, axes)}, {x}}, std::nullopt, true);
    check_graph({{ops::reduce_mean(x, axes, true)}, {x}}, std::nullopt, true);
    check_graph({{ops::reduce_max(x, axes)}, {x}}, std::nullopt, true);
  }
  Tensor rows = placeholder("R", dims({5, 100}));
  check_both({{ops::reduce_sum(rows, {1})}, {rows}});
}

// int32 max and min start from int32's own lowest and highest values: started from int64's,
// which truncate to 0 and -1, a max of negative values came out 0 (and a min of positives -1).
TEST(E2EOps, IntegerMaxAndMinOfValuesOfOneSign) {
  Tensor x = placeholder("X", dims({6, 35, 9}), ir::DType::kInt32);
  Tensor negative = ops::neg(ops::abs(x));  // <= 0
  Tensor positive = ops::abs(x);            // >= 0
  for (std::vector<int64_t> axes : std::vector<std::vector<int64_t>>{{0}, {-1}, {}}) {
    check_both({{ops::reduce_max(negative, axes), ops::reduce_min(positive, axes)}, {x}});
  }
  Tensor image = placeholder("I", dims({1, 2, 7, 6}), ir::DType::kInt32);
  check_both({{ops::max_pool2d(ops::neg(ops::abs(image)), {3, 3}, {2, 2}, {1, 1})}, {image}});
}

TEST(E2EOps, SoftmaxAndLayerNorm) {
  Tensor x = placeholder("X", dims({7, 50}));
  check_both({{ops::softmax(x, -1)}, {x}});
  Tensor x3 = placeholder("X3", dims({2, 5, 6}));
  check_graph({{ops::softmax(x3, 1)}, {x3}}, std::nullopt, true);
  Tensor g = placeholder("g", dims({50})), b = placeholder("b", dims({50}));
  check_both({{ops::layer_norm(x, 1, g, b)}, {x, g, b}}, {1e-4, 2e-4});
}

TEST(E2EOps, ElementwiseChainsWithBroadcasting) {
  Tensor a = placeholder("a", dims({4, 1, 37})), b = placeholder("b", dims({3, 37}));
  Tensor y = ops::mul(ops::relu(ops::add(a, b)), ops::sigmoid(b));
  check_both({{y}, {a, b}});
  Tensor z = ops::add(ops::gelu(a), ops::tanh(ops::exp(ops::mul(b, 0.5))));
  check_both({{z}, {a, b}});
  Tensor e = ops::sub(ops::erf(a), 1.0);
  check_graph({{e}, {a}}, std::nullopt, true);
}

TEST(E2EOps, ShapeOps) {
  Tensor x = placeholder("X", dims({3, 4, 5}));
  check_both({{ops::transpose(x, {2, 0, 1})}, {x}});
  check_both({{ops::reshape(x, dims({6, 10}))}, {x}});
  Tensor y = placeholder("Y", dims({3, 2, 5}));
  check_both({{ops::concat({x, y}, 1)}, {x, y}});
  check_both({{ops::slice(x, 2, 1, 5, 2)}, {x}});
  check_both({{ops::pad(x, {{0, 0}, {1, 2}, {3, 0}}, 0.5)}, {x}});
}

TEST(E2EOps, SymbolicMatmulAndElementwise) {
  ir::Var m = ir::size_var("M", 1, 4096);
  Tensor a = placeholder("A", {m, ir::int_imm(24)}), b = placeholder("B", dims({24, 40}));
  Tensor c = ops::matmul(a, b);
  for (int64_t mv : {1, 7, 64}) {
    check_graph({{c}, {a, b}, {{m.get(), mv}}}, std::nullopt, true);
  }
  check_graph({{c}, {a, b}, {{m.get(), 5}}}, std::nullopt, false);
  ir::Var n = ir::size_var("N", 0, 100000);
  Tensor x = placeholder("x", {n}), y = placeholder("y", {n});
  Tensor z = ops::relu(ops::add(x, y));
  for (int64_t nv : {0, 1, 15, 16, 1000}) {
    check_graph({{z}, {x, y}, {{n.get(), nv}}}, std::nullopt, true);
  }
}

}  // namespace
}  // namespace tessera::testing
