// Micro-kernel selection on synthetic cost tables whose best cover is known: top-k voting, the
// greedy weighted set cover, dispatch to the fastest selected kernel, the loss bounds and the cap.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "tune/dynamic/selection.h"
#include "util/check.h"

namespace tessera::tune::dynamic {
namespace {

// A time per point for `n` points from f(point).
template <typename F>
std::vector<double> row(size_t n, F f) {
  std::vector<double> r(n);
  for (size_t p = 0; p < n; ++p) r[p] = f(p);
  return r;
}

TEST(DynamicSelection, EachPointVotesForItsFastestInOrder) {
  CostTable t;
  t.ms = {{3, 1, 2}, {1, 2, 3}, {2, 3, std::numeric_limits<double>::infinity()}};
  const auto v1 = top_k_votes(t, 1);
  EXPECT_EQ(v1[0], (std::vector<int>{1}));
  EXPECT_EQ(v1[1], (std::vector<int>{0}));
  EXPECT_EQ(v1[2], (std::vector<int>{0}));
  const auto v3 = top_k_votes(t, 3);
  EXPECT_EQ(v3[0], (std::vector<int>{1, 2, 0}));
  EXPECT_EQ(v3[2], (std::vector<int>{0, 1}));  // candidate 2 cannot run point 2
}

TEST(DynamicSelection, OneKernelWithinTheBoundReplacesTwoSpecialists) {
  // A is best on the first half, B on the second; C is 1% behind the best everywhere.
  const size_t n = 40;
  CostTable t;
  t.ms = {row(n, [](size_t p) { return p < 20 ? 1.0 : 2.0; }),
          row(n, [](size_t p) { return p < 20 ? 2.0 : 1.0; }), row(n, [](size_t) { return 1.01; })};
  const Selection s = select_kernels(t);
  EXPECT_EQ(s.kernels, (std::vector<int>{2}));
  EXPECT_NEAR(s.loss, 0.01, 1e-9);
  EXPECT_NEAR(s.worst_point_loss, 0.01, 1e-9);
  for (int a : s.assignment) EXPECT_EQ(a, 0);
  // With no loss allowed, the two specialists stay and each point runs its own best.
  SelectionConstants strict;
  strict.loss_bound = 0;
  const Selection exact = select_kernels(t, strict);
  EXPECT_EQ(exact.kernels, (std::vector<int>{0, 1}));
  EXPECT_EQ(exact.loss, 0);
  for (size_t p = 0; p < n; ++p) EXPECT_EQ(exact.assignment[p], p < 20 ? 0 : 1);
}

TEST(DynamicSelection, ThePerPointBoundKeepsASpecialist) {
  // C is 1% behind on every point but one, where it is 30% behind: within the mean bound,
  // past the per-point bound, so B (best there) must stay next to C.
  const size_t n = 50;
  CostTable t;
  t.ms = {row(n, [](size_t) { return 1.0; }), row(n, [](size_t p) { return p == 7 ? 1.0 : 3.0; }),
          row(n, [](size_t p) { return p == 7 ? 1.3 : 1.005; })};
  t.ms[0][7] = 2.0;
  const Selection s = select_kernels(t);
  // {A} alone is 100% behind at point 7; {C} 30%; {A, B} and {B, C} meet both bounds, and
  // {A, B} loses nothing.
  ASSERT_EQ(s.kernels.size(), 2u);
  EXPECT_LE(s.worst_point_loss, SelectionConstants{}.point_loss_bound);
  EXPECT_EQ(s.kernels, (std::vector<int>{0, 1}));
  EXPECT_EQ(s.loss, 0);
}

TEST(DynamicSelection, HiddenSpecialistsAreFoundAmongDecoys) {
  // m specialists, each best on its own block of points and >= 20% slower elsewhere, and decoys
  // >= 15% slower than the best everywhere: the fewest kernels within the bounds are exactly
  // the specialists.
  std::mt19937 rng(5);
  for (int trial = 0; trial < 20; ++trial) {
    const int m = 1 + trial % 5, decoys = 6;
    const size_t per = 7, n = per * m;
    std::uniform_real_distribution<double> base(1.0, 10.0), slack(1.2, 2.0), dslack(1.15, 1.5);
    std::vector<double> best(n);
    for (double& b : best) b = base(rng);
    CostTable t;
    for (int c = 0; c < m + decoys; ++c) {
      t.ms.push_back(row(n, [&](size_t p) {
        const bool own = c < m && p / per == static_cast<size_t>(c);
        return best[p] * (own ? 1.0 : c < m ? slack(rng) : dslack(rng));
      }));
    }
    std::shuffle(t.ms.begin(), t.ms.end(), rng);
    const Selection s = select_kernels(t);
    ASSERT_EQ(static_cast<int>(s.kernels.size()), m) << "trial " << trial;
    EXPECT_EQ(s.loss, 0) << "trial " << trial;
    for (size_t p = 0; p < n; ++p) {
      EXPECT_EQ(t.ms[s.kernels[s.assignment[p]]][p], best[p]);
    }
  }
}

TEST(DynamicSelection, GreedyCoverTakesTheLargestRelativeGainFirst) {
  // Everyone votes for everyone (k = 3): B covers all points at 0.9 relative speed, more gain
  // than A (perfect on one point only) or C, so the cover is B alone.
  CostTable t;
  t.ms = {{1.0, 10.0, 10.0}, {1.1, 1.1, 1.1}, {10.0, 10.0, 1.0}};
  EXPECT_EQ(greedy_cover(t, top_k_votes(t, 3)), (std::vector<int>{1}));
  // With k = 1 each point's own best must be in the cover.
  std::vector<int> c1 = greedy_cover(t, top_k_votes(t, 1));
  std::sort(c1.begin(), c1.end());
  EXPECT_EQ(c1, (std::vector<int>{0, 1, 2}));
}

TEST(DynamicSelection, TheCapWinsOverTheBounds) {
  // Five specialists, 50% apart: five kernels are needed for the bounds, the cap allows two.
  const size_t n = 10;
  CostTable t;
  for (size_t c = 0; c < 5; ++c) {
    t.ms.push_back(row(n, [&](size_t p) { return p / 2 == c ? 1.0 : 1.5; }));
  }
  SelectionConstants capped;
  capped.max_kernels = 2;
  const Selection s = select_kernels(t, capped);
  EXPECT_EQ(s.kernels.size(), 2u);
  EXPECT_NEAR(s.worst_point_loss, 0.5, 1e-12);
  EXPECT_EQ(select_kernels(t).kernels.size(), 5u);
}

TEST(DynamicSelection, WeightsDecideWhichLossCounts) {
  // A is perfect on point 0, 10% slow on point 1; B the reverse. With the weight on point 1 and
  // a bound of 3%, B alone is enough (geomean slowdown ~0.1%); with equal weights (~4.9%) it is
  // not.
  CostTable t;
  t.ms = {{1.0, 1.1}, {1.1, 1.0}};
  SelectionConstants c;
  c.loss_bound = 0.03;
  c.point_loss_bound = 0.2;
  t.weights = {1, 99};
  EXPECT_EQ(select_kernels(t, c).kernels, (std::vector<int>{1}));
  t.weights = {1, 1};
  EXPECT_EQ(select_kernels(t, c).kernels.size(), 2u);
}

TEST(DynamicSelection, MalformedTablesAreErrors) {
  EXPECT_THROW(select_kernels(CostTable{}), Error);
  CostTable ragged;
  ragged.ms = {{1, 2}, {1}};
  EXPECT_THROW(select_kernels(ragged), Error);
  CostTable unrunnable;
  unrunnable.ms = {{1, std::numeric_limits<double>::infinity()}};
  EXPECT_THROW(select_kernels(unrunnable), Error);
}

}  // namespace
}  // namespace tessera::tune::dynamic
