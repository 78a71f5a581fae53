// The dispatcher: interval tables for one dynamic axis (direct and binary search agree on every
// size, boundaries sit halfway between samples), decision trees for several (every sample point
// gets its label), kFallback outside the tuned ranges, and JSON round trips.
#include <gtest/gtest.h>

#include <random>

#include "tune/dynamic/dispatcher.h"
#include "util/check.h"

namespace tessera::tune::dynamic {
namespace {

TEST(DynamicDispatcher, IntervalTableHitsEveryBoundary) {
  // Every size of [1, 18] sampled: 1..10 -> 0, 11..15 -> 1, 16..18 -> 0.
  std::vector<int64_t> values;
  std::vector<int> labels;
  for (int64_t v = 1; v <= 18; ++v) {
    values.push_back(v);
    labels.push_back(v <= 10 ? 0 : v <= 15 ? 1 : 0);
  }
  DispatchConstants binary;
  binary.max_direct_entries = 0;
  const IntervalTable direct = IntervalTable::build(values, labels, {1, 18});
  const IntervalTable search = IntervalTable::build(values, labels, {1, 18}, binary);
  EXPECT_TRUE(direct.direct());
  EXPECT_FALSE(search.direct());
  EXPECT_EQ(search.starts(), (std::vector<int64_t>{1, 11, 16}));
  EXPECT_EQ(search.labels(), (std::vector<int>{0, 1, 0}));
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(direct.lookup(values[i]), labels[i]) << values[i];
    EXPECT_EQ(search.lookup(values[i]), labels[i]) << values[i];
  }
  for (int64_t out : {int64_t{-5}, int64_t{0}, int64_t{19}, int64_t{1} << 40}) {
    EXPECT_EQ(direct.lookup(out), kFallback) << out;
    EXPECT_EQ(search.lookup(out), kFallback) << out;
  }
}

TEST(DynamicDispatcher, SizesBetweenSamplesGoToTheNearestOne) {
  // Samples at 1 (label 0), 11 (label 1), 14 (label 2) of the range [0, 20]: 6 is as near to 1
  // as to 11 and stays with the lower sample; sizes below the first / above the last sample take
  // its label.
  const IntervalTable t = IntervalTable::build({11, 1, 14}, {1, 0, 2}, {0, 20});
  const std::vector<int> want = {0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2};
  for (int64_t v = 0; v <= 20; ++v) EXPECT_EQ(t.lookup(v), want[v]) << v;
  EXPECT_THROW(IntervalTable::build({1, 1}, {0, 1}, {0, 5}), Error);  // a size given twice
  EXPECT_THROW(IntervalTable::build({7}, {0}, {0, 5}), Error);        // outside the range
}

TEST(DynamicDispatcher, DecisionTreeReproducesEverySampleLabel) {
  std::mt19937 rng(11);
  const std::vector<SizeRange> ranges = {{1, 9}, {0, 6}, {2, 4}};
  std::vector<SizePoint> points;
  for (int64_t a = 1; a <= 9; a += 2) {
    for (int64_t b = 0; b <= 6; ++b) {
      for (int64_t c = 2; c <= 4; ++c) points.push_back({a, b, c});
    }
  }
  for (int labels_kind = 0; labels_kind < 3; ++labels_kind) {
    std::vector<int> labels;
    std::uniform_int_distribution<int> any(0, 4);
    for (const SizePoint& p : points) {
      // A rule a tree grows exactly, a noisier rule, random labels.
      labels.push_back(labels_kind == 0   ? (p[0] > 5) + 2 * (p[1] >= 3)
                       : labels_kind == 1 ? (p[0] * p[1] + p[2]) % 3
                                          : any(rng));
    }
    const DecisionTree tree = DecisionTree::build(points, labels, ranges);
    for (size_t i = 0; i < points.size(); ++i) {
      EXPECT_EQ(tree.lookup(points[i].data()), labels[i]) << "kind " << labels_kind;
    }
    if (labels_kind == 0) {
      EXPECT_LE(tree.nodes().size(), 7u);  // two splits on axis 1 under one on axis 0
      EXPECT_LE(tree.depth(), 3);
    }
    // Every point of the box (also between samples) gets some kernel; outside, the fallback.
    for (int64_t a = 1; a <= 9; ++a) {
      SizePoint p = {a, 3, 3};
      const int l = tree.lookup(p.data());
      EXPECT_GE(l, 0);
      EXPECT_LE(l, 4);
    }
    for (const SizePoint& out : std::vector<SizePoint>{
             {0, 3, 3}, {10, 3, 3}, {5, -1, 3}, {5, 7, 3}, {5, 3, 1}, {5, 3, 5}}) {
      EXPECT_EQ(tree.lookup(out.data()), kFallback);
    }
  }
}

// Every size of the box grown by `margin` on each side dispatches the same with `a` and `b`.
void expect_same_dispatch(const Dispatcher& a, const Dispatcher& b,
                          const std::vector<SizeRange>& ranges, int64_t margin) {
  std::vector<SizePoint> pts{SizePoint{}};
  for (const SizeRange& r : ranges) {
    std::vector<SizePoint> next;
    for (const SizePoint& p : pts) {
      for (int64_t v = r.lo - margin; v <= r.hi + margin; ++v) {
        next.push_back(p);
        next.back().push_back(v);
      }
    }
    pts = std::move(next);
  }
  for (const SizePoint& p : pts) {
    EXPECT_EQ(a.lookup(p), b.lookup(p)) << ::testing::PrintToString(p);
  }
}

TEST(DynamicDispatcher, JsonRoundTripsDispatchTheSame) {
  const Dispatcher none = Dispatcher::build({SizePoint{}}, {3}, {});
  EXPECT_EQ(none.lookup(SizePoint{}), 3);
  expect_same_dispatch(none, Dispatcher::from_json(util::Json::parse(none.to_json().dump())), {},
                       0);

  const std::vector<SizeRange> one = {{1, 128}};
  std::vector<SizePoint> pts;
  std::vector<int> labels;
  for (int64_t v = 1; v <= 128; v += 3) {
    pts.push_back({v});
    labels.push_back(static_cast<int>((v / 17) % 3));
  }
  const Dispatcher d1 = Dispatcher::build(pts, labels, one);
  const Dispatcher r1 = Dispatcher::from_json(util::Json::parse(d1.to_json().dump()));
  expect_same_dispatch(d1, r1, one, 3);
  EXPECT_EQ(r1.lookup(SizePoint{0}), kFallback);
  EXPECT_EQ(d1.max_label(), 2);

  const std::vector<SizeRange> two = {{1, 8}, {4, 9}};
  pts.clear();
  labels.clear();
  for (int64_t a = 1; a <= 8; ++a) {
    for (int64_t b = 4; b <= 9; b += 5) {
      pts.push_back({a, b});
      labels.push_back(static_cast<int>(a > 4) + static_cast<int>(b > 6));
    }
  }
  const Dispatcher d2 = Dispatcher::build(pts, labels, two);
  expect_same_dispatch(d2, Dispatcher::from_json(util::Json::parse(d2.to_json().dump())), two, 2);

  // Damaged trees are refused rather than looping or reading out of bounds.
  util::Json bad = d2.to_json();
  bad["nodes"][0][2] = util::Json(0);  // the root's left child is the root
  EXPECT_THROW(Dispatcher::from_json(bad), Error);
  EXPECT_THROW(Dispatcher::from_json(util::Json::parse("{\"axes\": 1}")), Error);
}

}  // namespace
}  // namespace tessera::tune::dynamic
