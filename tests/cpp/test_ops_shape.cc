// Shape ops: permute/transpose, reshape (incl. -1), concat, slice, pad, broadcast_to.
#include <gtest/gtest.h>

#include "naive_ops.h"
#include "ops/shape.h"

namespace tessera {
namespace {

using ir::Tensor;
using optest::all_close;
using optest::dims;
using optest::rand;
using optest::reference;

TEST(OpsShape, PermuteAndTranspose) {
  Tensor x = ir::placeholder("X", dims({2, 3, 4}));
  auto xv = rand({2, 3, 4}, 101);
  for (const std::vector<int64_t>& perm :
       {std::vector<int64_t>{0, 1, 2}, {2, 0, 1}, {1, 2, 0}, {2, 1, 0}, {0, 2, 1}}) {
    Tensor y = ops::permute(x, perm);
    EXPECT_EQ(y->op->tag, "injective");
    EXPECT_TRUE(all_close(reference(y, {{x, &xv}}), naive::permute(xv, perm), 0, 0));
  }
  EXPECT_TRUE(all_close(reference(ops::transpose(x, {-1, 0, -2}), {{x, &xv}}),
                        naive::permute(xv, {2, 0, 1}), 0, 0));
  EXPECT_TRUE(all_close(reference(ops::transpose(x, 0, -1), {{x, &xv}}),
                        naive::permute(xv, {2, 1, 0}), 0, 0));
  EXPECT_TRUE(optest::throws_with([&] { ops::permute(x, {0, 0, 1}); }, "appears twice"));
  EXPECT_TRUE(optest::throws_with([&] { ops::permute(x, {0, 1}); }, "permutation of 2 dims"));
}

TEST(OpsShape, Reshape) {
  Tensor x = ir::placeholder("X", dims({2, 3, 4}));
  auto xv = rand({2, 3, 4}, 102);
  const std::vector<std::vector<int64_t>> targets = {
      {24}, {4, 6}, {6, 4}, {2, 12}, {3, 2, 4}, {1, 24, 1}, {2, 2, 2, 3}, {4, 3, 2}};
  for (const auto& t : targets) {
    Tensor y = ops::reshape(x, dims(t));
    EXPECT_TRUE(all_close(reference(y, {{x, &xv}}), naive::reshape(xv, t), 0, 0));
  }
  Tensor inferred = ops::reshape(x, dims({-1, 8}));
  EXPECT_TRUE(inferred->shape[0]->is_const_int(3));
  EXPECT_TRUE(all_close(reference(inferred, {{x, &xv}}), naive::reshape(xv, {3, 8}), 0, 0));
  EXPECT_TRUE(optest::throws_with([&] { ops::reshape(x, dims({5, 5})); }, "cannot reshape"));
  EXPECT_TRUE(optest::throws_with([&] { ops::reshape(x, dims({-1, 5})); }, "cannot infer"));
  EXPECT_TRUE(optest::throws_with([&] { ops::reshape(x, dims({-1, -1})); }, "more than one -1"));
}

TEST(OpsShape, ReshapeSymbolic) {
  ir::Var n = ir::size_var("N", 1, 64);
  Tensor x = ir::placeholder("X", {n, ir::int_imm(6)});
  Tensor y = ops::reshape(x, {n, ir::int_imm(2), ir::int_imm(3)});
  Tensor z = ops::reshape(x, dims({-1}));  // N*6 elements, inferred symbolically
  for (int64_t nv : {1, 5}) {
    auto xv = rand({nv, 6}, 103);
    EXPECT_TRUE(all_close(reference(y, {{x, &xv}}), naive::reshape(xv, {nv, 2, 3}), 0, 0));
    EXPECT_TRUE(all_close(reference(z, {{x, &xv}}), naive::reshape(xv, {nv * 6}), 0, 0));
  }
}

TEST(OpsShape, Concat) {
  Tensor a = ir::placeholder("A", dims({2, 3, 4}));
  Tensor b = ir::placeholder("B", dims({2, 1, 4}));
  Tensor c = ir::placeholder("C", dims({2, 5, 4}));
  auto av = rand({2, 3, 4}, 104), bv = rand({2, 1, 4}, 105), cv = rand({2, 5, 4}, 106);
  Tensor y = ops::concat({a, b, c}, 1);
  EXPECT_TRUE(y->shape[1]->is_const_int(9));
  EXPECT_TRUE(all_close(reference(y, {{a, &av}, {b, &bv}, {c, &cv}}),
                        naive::concat({&av, &bv, &cv}, 1), 0, 0));
  EXPECT_TRUE(all_close(reference(ops::concat({a, a}, -1), {{a, &av}}),
                        naive::concat({&av, &av}, 2), 0, 0));
  EXPECT_TRUE(all_close(reference(ops::concat({a}, 0), {{a, &av}}), naive::concat({&av}, 0), 0, 0));
  EXPECT_TRUE(optest::throws_with([&] { ops::concat({a, b}, 0); }, "differ in dim 1"));
  Tensor d = ir::placeholder("D", dims({2, 3}));
  EXPECT_TRUE(optest::throws_with([&] { ops::concat({a, d}, 0); }, "different numbers of dims"));
}

TEST(OpsShape, Slice) {
  Tensor x = ir::placeholder("X", dims({7, 5}));
  auto xv = rand({7, 5}, 107);
  struct Case {
    int64_t axis, start, end, step;
  };
  for (const Case& c : {Case{0, 1, 5, 1}, Case{0, 0, 7, 2}, Case{0, 1, 7, 3}, Case{1, -3, 5, 1},
                        Case{1, -4, -1, 2}, Case{0, 2, 100, 1}, Case{-1, 0, ops::kSliceEnd, 4},
                        Case{0, -100, 3, 1}, Case{0, 5, 5, 1}}) {
    const int64_t naive_end = c.end == ops::kSliceEnd ? 1000 : c.end;
    const int axis = static_cast<int>(c.axis < 0 ? c.axis + 2 : c.axis);
    Tensor y = ops::slice(x, c.axis, c.start, c.end, c.step);
    EXPECT_TRUE(all_close(reference(y, {{x, &xv}}),
                          naive::slice(xv, axis, c.start, naive_end, c.step), 0, 0))
        << c.axis << " " << c.start << ":" << c.end << ":" << c.step;
  }
  EXPECT_TRUE(optest::throws_with([&] { ops::slice(x, 0, 0, 3, 0); }, "step must be >= 1"));
}

TEST(OpsShape, SliceSymbolic) {
  ir::Var n = ir::size_var("N", 4, 64);
  Tensor x = ir::placeholder("X", {n});
  Tensor head = ops::slice(x, 0, 1, -1, 2);  // x[1:-1:2]
  Tensor tail = ops::slice(x, 0, -3);        // x[-3:]
  for (int64_t nv : {4, 7, 10}) {
    auto xv = rand({nv}, 108);
    EXPECT_TRUE(all_close(reference(head, {{x, &xv}}), naive::slice(xv, 0, 1, -1, 2), 0, 0));
    EXPECT_TRUE(all_close(reference(tail, {{x, &xv}}), naive::slice(xv, 0, -3, nv, 1), 0, 0));
  }
}

TEST(OpsShape, Pad) {
  Tensor x = ir::placeholder("X", dims({2, 3, 4}));
  auto xv = rand({2, 3, 4}, 109);
  const std::vector<std::vector<std::pair<int64_t, int64_t>>> cases = {
      {{0, 0}, {1, 1}, {2, 0}}, {{1, 0}, {0, 0}, {0, 3}}, {{0, 0}, {0, 0}, {0, 0}}};
  for (const auto& pads : cases) {
    EXPECT_TRUE(all_close(reference(ops::pad(x, pads, -2.5), {{x, &xv}}),
                          naive::pad(xv, pads, -2.5), 0, 0));
  }
  EXPECT_TRUE(optest::throws_with([&] { ops::pad(x, {{1, 1}}); }, "give one per dim"));
  EXPECT_TRUE(optest::throws_with([&] { ops::pad(x, {{0, 0}, {0, -1}, {0, 0}}); }, "negative"));
}

TEST(OpsShape, BroadcastTo) {
  Tensor x = ir::placeholder("X", dims({3, 1}));
  auto xv = rand({3, 1}, 110);
  EXPECT_TRUE(all_close(reference(ops::broadcast_to(x, dims({2, 3, 4})), {{x, &xv}}),
                        naive::broadcast_to(xv, {2, 3, 4}), 0, 0));
  EXPECT_TRUE(all_close(reference(ops::broadcast_to(x, dims({3, 1})), {{x, &xv}}),
                        naive::broadcast_to(xv, {3, 1}), 0, 0));
  EXPECT_TRUE(optest::throws_with([&] { ops::broadcast_to(x, dims({2, 4})); }, "cannot broadcast"));
  EXPECT_TRUE(optest::throws_with([&] { ops::broadcast_to(x, dims({3})); }, "fewer dims"));
}

}  // namespace
}  // namespace tessera
