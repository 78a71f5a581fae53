// reduce_sum / mean / max / min over axis sets (negative, several, all), keepdim, and errors.
#include <gtest/gtest.h>

#include "naive_ops.h"
#include "ops/reduction.h"

namespace tessera {
namespace {

using ir::Tensor;
using optest::all_close;
using optest::dims;
using optest::rand;
using optest::reference;

struct RedCase {
  std::vector<int64_t> shape;
  std::vector<int64_t> axes;       // as passed to the op (may be negative / empty)
  std::vector<int64_t> norm_axes;  // the same, normalised, for the naive loop
  bool keepdim;
};

std::ostream& operator<<(std::ostream& os, const RedCase& c) {
  os << "shape=";
  for (int64_t d : c.shape) os << d << ",";
  os << " axes=";
  for (int64_t a : c.axes) os << a << ",";
  return os << " keepdim=" << c.keepdim;
}

class OpsReduceTest : public ::testing::TestWithParam<RedCase> {};

TEST_P(OpsReduceTest, AllKindsMatchNaive) {
  const RedCase c = GetParam();
  Tensor x = ir::placeholder("X", dims(c.shape));
  auto xv = rand(c.shape, 61);
  struct Kind {
    Tensor t;
    naive::Red red;
  };
  for (const Kind& k : {Kind{ops::reduce_sum(x, c.axes, c.keepdim), naive::Red::kSum},
                        Kind{ops::reduce_mean(x, c.axes, c.keepdim), naive::Red::kMean},
                        Kind{ops::reduce_max(x, c.axes, c.keepdim), naive::Red::kMax},
                        Kind{ops::reduce_min(x, c.axes, c.keepdim), naive::Red::kMin}}) {
    EXPECT_TRUE(
        all_close(reference(k.t, {{x, &xv}}), naive::reduce(xv, c.norm_axes, c.keepdim, k.red)))
        << k.t->name;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Axes, OpsReduceTest,
    ::testing::Values(RedCase{{4, 5}, {1}, {1}, false}, RedCase{{4, 5}, {-1}, {1}, true},
                      RedCase{{4, 5}, {0}, {0}, false}, RedCase{{3, 4, 5}, {0, 2}, {0, 2}, false},
                      RedCase{{3, 4, 5}, {-1, -3}, {0, 2}, true},
                      RedCase{{3, 4, 5}, {1}, {1}, true}, RedCase{{3, 4, 5}, {}, {}, false},
                      RedCase{{3, 4, 5}, {}, {}, true},
                      RedCase{{2, 1, 3, 1}, {1, 3}, {1, 3}, false},
                      RedCase{{2, 3, 2, 3}, {3, 1}, {1, 3}, true}, RedCase{{7}, {0}, {0}, false},
                      RedCase{{1, 6}, {-2}, {0}, false}));

TEST(OpsReduce, ShapesAndStructure) {
  Tensor x = ir::placeholder("X", dims({3, 4, 5}));
  Tensor s = ops::reduce_sum(x, {1});
  ASSERT_EQ(s->ndim(), 2);
  EXPECT_TRUE(s->shape[1]->is_const_int(5));
  EXPECT_EQ(s->op->tag, "reduce");
  EXPECT_EQ(s->op->reduce_axes.size(), 1u);
  Tensor k = ops::reduce_max(x, {1}, true);
  ASSERT_EQ(k->ndim(), 3);
  EXPECT_TRUE(k->shape[1]->is_const_int(1));
  EXPECT_EQ(ops::reduce_min(x)->ndim(), 0);  // all axes: 0-d result
  // mean = sum then an elementwise scale.
  Tensor m = ops::reduce_mean(x, {0, 2});
  auto dag = ir::collect_dag({m});
  ASSERT_EQ(dag.computes.size(), 2u);
  EXPECT_EQ(dag.computes[0]->op->reduce, ir::ReduceKind::kSum);
  EXPECT_EQ(m->op->tag, "elementwise");
}

TEST(OpsReduce, SymbolicExtent) {
  ir::Var n = ir::size_var("N", 1, 100);
  Tensor x = ir::placeholder("X", {n, ir::int_imm(3)});
  Tensor m = ops::reduce_mean(x, {0});
  for (int64_t nv : {1, 4, 9}) {
    auto xv = rand({nv, 3}, 62);
    EXPECT_TRUE(
        all_close(reference(m, {{x, &xv}}), naive::reduce(xv, {0}, false, naive::Red::kMean)));
  }
}

TEST(OpsReduce, IntegerMaxAndSum) {
  Tensor x = ir::placeholder("X", dims({3, 4}), ir::DType::kInt32);
  auto xv = runtime::NDArray::random(ir::DType::kInt32, {3, 4}, 63, -50, 50);
  auto got = reference(ops::reduce_max(x, {1}), {{x, &xv}});
  EXPECT_EQ(got.dtype, ir::DType::kInt32);
  EXPECT_TRUE(all_close(got, naive::reduce(xv, {1}, false, naive::Red::kMax), 0, 0));
  EXPECT_TRUE(all_close(reference(ops::reduce_sum(x, {0}), {{x, &xv}}),
                        naive::reduce(xv, {0}, false, naive::Red::kSum), 0, 0));
}

TEST(OpsReduce, Errors) {
  Tensor x = ir::placeholder("X", dims({3, 4}));
  EXPECT_TRUE(optest::throws_with([&] { ops::reduce_sum(x, {2}); }, "axis 2 out of range"));
  EXPECT_TRUE(optest::throws_with([&] { ops::reduce_sum(x, {-3}); }, "out of range"));
  EXPECT_TRUE(optest::throws_with([&] { ops::reduce_max(x, {1, -1}); }, "listed twice"));
  Tensor xi = ir::placeholder("XI", dims({3, 4}), ir::DType::kInt64);
  EXPECT_TRUE(optest::throws_with([&] { ops::reduce_mean(xi, {1}); }, "float"));
}

}  // namespace
}  // namespace tessera
