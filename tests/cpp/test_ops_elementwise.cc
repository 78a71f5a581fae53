// Elementwise ops: every unary and binary op, broadcasting patterns, scalar operands, where,
// cast, symbolic sizes and errors.
#include <gtest/gtest.h>

#include <cmath>

#include "naive_ops.h"
#include "ops/elementwise.h"

namespace tessera {
namespace {

using ir::Tensor;
using optest::all_close;
using optest::dims;
using optest::rand;
using optest::reference;

struct UnaryCase {
  const char* name;
  std::function<Tensor(const Tensor&)> op;
  std::function<double(double)> f;
  double lo, hi;  // input range within the function's domain
};

TEST(OpsElementwise, UnaryOpsMatchNaive) {
  const std::vector<UnaryCase> cases = {
      {"neg", [](const Tensor& x) { return ops::neg(x); }, [](double v) { return -v; }, -2, 2},
      {"abs", [](const Tensor& x) { return ops::abs(x); }, [](double v) { return std::fabs(v); },
       -2, 2},
      {"relu", [](const Tensor& x) { return ops::relu(x); },
       [](double v) { return v > 0 ? v : 0.0; }, -2, 2},
      {"gelu", [](const Tensor& x) { return ops::gelu(x); },
       [](double v) { return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))); }, -4, 4},
      {"tanh", [](const Tensor& x) { return ops::tanh(x); }, [](double v) { return std::tanh(v); },
       -3, 3},
      {"exp", [](const Tensor& x) { return ops::exp(x); }, [](double v) { return std::exp(v); }, -3,
       3},
      {"log", [](const Tensor& x) { return ops::log(x); }, [](double v) { return std::log(v); },
       0.1, 5},
      {"sqrt", [](const Tensor& x) { return ops::sqrt(x); }, [](double v) { return std::sqrt(v); },
       0, 5},
      {"rsqrt", [](const Tensor& x) { return ops::rsqrt(x); },
       [](double v) { return 1.0 / std::sqrt(v); }, 0.1, 5},
      {"sigmoid", [](const Tensor& x) { return ops::sigmoid(x); },
       [](double v) { return 1.0 / (1.0 + std::exp(-v)); }, -6, 6},
      {"erf", [](const Tensor& x) { return ops::erf(x); }, [](double v) { return std::erf(v); }, -2,
       2},
  };
  Tensor x = ir::placeholder("X", dims({3, 5}));
  for (const UnaryCase& c : cases) {
    auto xv = rand({3, 5}, 81, c.lo, c.hi);
    Tensor y = c.op(x);
    EXPECT_EQ(y->name, c.name);
    EXPECT_EQ(y->op->tag, "elementwise");
    EXPECT_TRUE(all_close(reference(y, {{x, &xv}}), naive::map(xv, c.f))) << c.name;
  }
}

struct BinaryCase {
  const char* name;
  std::function<Tensor(const Tensor&, const Tensor&)> op;
  std::function<double(double, double)> f;
};

const std::vector<BinaryCase>& binary_cases() {
  static const std::vector<BinaryCase> cases = {
      {"add", [](const Tensor& a, const Tensor& b) { return ops::add(a, b); },
       [](double a, double b) { return a + b; }},
      {"sub", [](const Tensor& a, const Tensor& b) { return ops::sub(a, b); },
       [](double a, double b) { return a - b; }},
      {"mul", [](const Tensor& a, const Tensor& b) { return ops::mul(a, b); },
       [](double a, double b) { return a * b; }},
      {"div", [](const Tensor& a, const Tensor& b) { return ops::div(a, b); },
       [](double a, double b) { return a / b; }},
      {"maximum", [](const Tensor& a, const Tensor& b) { return ops::maximum(a, b); },
       [](double a, double b) { return std::max(a, b); }},
      {"minimum", [](const Tensor& a, const Tensor& b) { return ops::minimum(a, b); },
       [](double a, double b) { return std::min(a, b); }},
      {"pow", [](const Tensor& a, const Tensor& b) { return ops::pow(a, b); },
       [](double a, double b) { return std::pow(a, b); }},
  };
  return cases;
}

struct BroadcastCase {
  std::vector<int64_t> a, b;
};

class OpsBroadcastTest : public ::testing::TestWithParam<BroadcastCase> {};

TEST_P(OpsBroadcastTest, BinaryOpsMatchNaive) {
  const BroadcastCase c = GetParam();
  Tensor a = ir::placeholder("A", dims(c.a));
  Tensor b = ir::placeholder("B", dims(c.b));
  // Positive operands keep pow and div in their comfortable domain.
  auto av = rand(c.a, 82, 0.5, 2.0), bv = rand(c.b, 83, 0.5, 2.0);
  for (const BinaryCase& bc : binary_cases()) {
    Tensor y = bc.op(a, b);
    EXPECT_EQ(y->name, bc.name);
    EXPECT_TRUE(all_close(reference(y, {{a, &av}, {b, &bv}}), naive::zip(av, bv, bc.f))) << bc.name;
  }
}

INSTANTIATE_TEST_SUITE_P(Patterns, OpsBroadcastTest,
                         ::testing::Values(BroadcastCase{{3, 4}, {3, 4}},  // same shape
                                           BroadcastCase{{3, 4}, {4}},     // row vector, fewer dims
                                           BroadcastCase{{3, 1}, {1, 4}},  // outer product
                                           BroadcastCase{{2, 3, 4}, {3, 1}},  // middle dim
                                           BroadcastCase{{1}, {2, 3}},        // scalar-like tensor
                                           BroadcastCase{{}, {2, 3}},         // 0-d tensor
                                           BroadcastCase{{2, 1, 5},
                                                         {1, 3, 1}},  // both sides broadcast
                                           BroadcastCase{{4, 1, 1}, {4, 2, 3}}));

TEST(OpsElementwise, ScalarOperands) {
  Tensor x = ir::placeholder("X", dims({2, 3}));
  auto xv = rand({2, 3}, 84, 0.5, 2.0);
  struct Case {
    Tensor t;
    std::function<double(double)> f;
  };
  const std::vector<Case> cases = {
      {ops::add(x, 2.5), [](double v) { return v + 2.5; }},
      {ops::add(1.5, x), [](double v) { return 1.5 + v; }},
      {ops::sub(x, 1.0), [](double v) { return v - 1.0; }},
      {ops::sub(3.0, x), [](double v) { return 3.0 - v; }},
      {ops::mul(x, -2.0), [](double v) { return -2.0 * v; }},
      {ops::div(x, 4.0), [](double v) { return v / 4.0; }},
      {ops::div(1.0, x), [](double v) { return 1.0 / v; }},
      {ops::maximum(x, 1.0), [](double v) { return std::max(v, 1.0); }},
      {ops::minimum(1.0, x), [](double v) { return std::min(1.0, v); }},
      {ops::pow(x, 2.0), [](double v) { return v * v; }},
      {ops::pow(2.0, x), [](double v) { return std::pow(2.0, v); }},
      {ops::add(x, 0), [](double v) { return v; }},  // an int literal picks the scalar overload
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_TRUE(all_close(reference(cases[i].t, {{x, &xv}}), naive::map(xv, cases[i].f)))
        << "case " << i << " (" << cases[i].t->name << ")";
  }
}

TEST(OpsElementwise, WhereAndCast) {
  Tensor c = ir::placeholder("C", dims({3, 1}), ir::DType::kBool);
  Tensor a = ir::placeholder("A", dims({3, 4}));
  Tensor b = ir::placeholder("B", dims({4}));
  auto cv = runtime::NDArray::random(ir::DType::kBool, {3, 1}, 85);
  cv.set_int(0, 1);
  cv.set_int(1, 0);
  auto av = rand({3, 4}, 86), bv = rand({4}, 87);
  EXPECT_TRUE(all_close(reference(ops::where(c, a, b), {{c, &cv}, {a, &av}, {b, &bv}}),
                        naive::where(cv, av, bv)));
  // A float condition is compared with 0.
  Tensor cf = ir::placeholder("CF", dims({3, 4}));
  auto cfv = rand({3, 4}, 88, -1, 1);
  for (int64_t i = 0; i < 12; i += 3) cfv.set(i, 0.0);
  EXPECT_TRUE(all_close(reference(ops::where(cf, a, b), {{cf, &cfv}, {a, &av}, {b, &bv}}),
                        naive::where(cfv, av, bv)));

  auto to_int = reference(ops::cast(a, ir::DType::kInt32), {{a, &av}});
  EXPECT_EQ(to_int.dtype, ir::DType::kInt32);
  EXPECT_TRUE(
      all_close(to_int, naive::map(av, [](double v) { return std::trunc(v * 1.0); }), 0, 0));
}

TEST(OpsElementwise, IntegerOps) {
  Tensor a = ir::placeholder("A", dims({2, 3}), ir::DType::kInt64);
  Tensor b = ir::placeholder("B", dims({3}), ir::DType::kInt64);
  auto av = runtime::NDArray::random(ir::DType::kInt64, {2, 3}, 89, -9, 9);
  auto bv = runtime::NDArray::random(ir::DType::kInt64, {3}, 90, -9, 9);
  EXPECT_TRUE(all_close(reference(ops::mul(a, b), {{a, &av}, {b, &bv}}),
                        naive::zip(av, bv, [](double x, double y) { return x * y; }), 0, 0));
  EXPECT_TRUE(all_close(reference(ops::abs(a), {{a, &av}}),
                        naive::map(av, [](double x) { return std::fabs(x); }), 0, 0));
  EXPECT_TRUE(all_close(reference(ops::relu(a), {{a, &av}}),
                        naive::map(av, [](double x) { return std::max(x, 0.0); }), 0, 0));
}

TEST(OpsElementwise, SymbolicBroadcast) {
  ir::Var n = ir::size_var("N", 1, 1000), m = ir::size_var("M", 1, 1000);
  Tensor a = ir::placeholder("A", {n, m});
  Tensor b = ir::placeholder("B", {ir::int_imm(1), m});
  Tensor y = ops::relu(ops::add(a, b));
  ASSERT_EQ(y->ndim(), 2);
  EXPECT_TRUE(y->shape[0].same_as(n));
  for (auto [nv, mv] : {std::pair<int64_t, int64_t>{1, 5}, {4, 3}, {6, 1}}) {
    auto av = rand({nv, mv}, 91), bv = rand({1, mv}, 92);
    std::map<const ir::ExprNode*, int64_t> sizes{{n.get(), nv}, {m.get(), mv}};
    auto want = naive::map(naive::zip(av, bv, [](double x, double z) { return x + z; }),
                           [](double v) { return std::max(v, 0.0); });
    EXPECT_TRUE(all_close(reference(y, {{a, &av}, {b, &bv}}, sizes), want));
  }
}

TEST(OpsElementwise, Errors) {
  Tensor a = ir::placeholder("A", dims({3, 4}));
  Tensor b = ir::placeholder("B", dims({3, 5}));
  EXPECT_TRUE(optest::throws_with([&] { ops::add(a, b); }, "cannot be broadcast (dim 4 vs 5)"));
  Tensor d = ir::placeholder("D", dims({3, 4}), ir::DType::kFloat64);
  EXPECT_TRUE(optest::throws_with([&] { ops::mul(a, d); }, "dtypes differ"));
  Tensor i = ir::placeholder("I", dims({3, 4}), ir::DType::kInt32);
  EXPECT_TRUE(optest::throws_with([&] { ops::exp(i); }, "needs a float operand"));
  EXPECT_TRUE(optest::throws_with([&] { ops::div(i, 2.0); }, "needs a float operand"));
  EXPECT_TRUE(optest::throws_with([&] { ops::where(a, a, d); }, "dtypes differ"));
}

}  // namespace
}  // namespace tessera
