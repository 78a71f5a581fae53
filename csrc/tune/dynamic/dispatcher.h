#pragma once
// The run-time dispatcher of a dynamic kernel: size point -> which selected micro-kernel runs it.
//
// Built from labelled sample points (each tuned size and the kernel selection gave it). A size
// between samples takes the label of the nearest sample below or above (the boundary sits halfway;
// a tie goes to the lower sample). Sizes outside the tuned ranges get kFallback: the caller runs
// its fallback kernel, never an out-of-range specialisation.
//
//   one axis     IntervalTable: a direct table (one load) when the range is short, else a binary
//                search over the interval starts
//   several      DecisionTree: axis-aligned threshold splits (CART with Gini impurity, one sorted
//                sweep per axis and node), grown until every leaf is pure, so every sample point
//                gets exactly its label
//   none         the one kernel
#include <cstdint>
#include <vector>

#include "tune/dynamic/workload.h"
#include "util/json.h"

namespace tessera::tune::dynamic {

inline constexpr int kFallback = -1;

struct DispatchConstants {
  // One-axis ranges with at most this many sizes use a direct table (one load per dispatch).
  int64_t max_direct_entries = 4096;
  // Ranges with at most this many size points in all are dispatched from every point's label,
  // not the sample points' alone (the tuner labels each by its predictions).
  int64_t max_labelled_points = 4096;
};

class IntervalTable {
 public:
  // `values` with one label each (any order, no duplicates), all inside `range`.
  static IntervalTable build(const std::vector<int64_t>& values, const std::vector<int>& labels,
                             SizeRange range, const DispatchConstants& constants = {});
  int lookup(int64_t v) const {
    if (v < range_.lo || v > range_.hi) return kFallback;
    if (!direct_.empty()) return direct_[static_cast<size_t>(v - range_.lo)];
    return lookup_interval(v);
  }
  // Intervals: starts[i] .. starts[i+1]-1 (the last one to range.hi) run kernel labels[i];
  // neighbours have different labels.
  const std::vector<int64_t>& starts() const { return starts_; }
  const std::vector<int>& labels() const { return labels_; }
  SizeRange range() const { return range_; }
  bool direct() const { return !direct_.empty(); }

 private:
  friend class Dispatcher;
  int lookup_interval(int64_t v) const;
  SizeRange range_;
  std::vector<int64_t> starts_;
  std::vector<int> labels_;
  std::vector<int> direct_;  // label per size of the range, when short enough
};

class DecisionTree {
 public:
  struct Node {
    int axis = -1;          // -1: leaf
    int64_t threshold = 0;  // size[axis] < threshold goes left
    int left = -1, right = -1;
    int label = 0;  // leaves
  };
  // `points` (one value per axis, distinct) with one label each, all inside `ranges`.
  static DecisionTree build(const std::vector<SizePoint>& points, const std::vector<int>& labels,
                            std::vector<SizeRange> ranges);
  int lookup(const int64_t* sizes) const;
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<SizeRange>& ranges() const { return ranges_; }
  int depth() const;

 private:
  friend class Dispatcher;
  int grow(std::vector<size_t> idx, const std::vector<SizePoint>& points,
           const std::vector<int>& labels);
  std::vector<SizeRange> ranges_;
  std::vector<Node> nodes_;  // nodes_[0] is the root
};

class Dispatcher {
 public:
  Dispatcher() = default;
  // Labels are kernel indices (>= 0); `ranges` are the workload's, one per axis.
  static Dispatcher build(const std::vector<SizePoint>& points, const std::vector<int>& labels,
                          const std::vector<SizeRange>& ranges,
                          const DispatchConstants& constants = {});
  // The kernel for `sizes` (one per axis), or kFallback outside the tuned ranges.
  int lookup(const int64_t* sizes) const {
    if (axes_ == 0) return single_;
    if (axes_ == 1) return table_.lookup(sizes[0]);
    return tree_.lookup(sizes);
  }
  int lookup(const SizePoint& sizes) const;  // checks the count
  size_t axes() const { return axes_; }
  int max_label() const;  // the largest kernel index it dispatches to

  util::Json to_json() const;
  static Dispatcher from_json(const util::Json& j);  // throws tessera::Error when malformed

 private:
  size_t axes_ = 0;
  int single_ = 0;
  IntervalTable table_;
  DecisionTree tree_;
};

}  // namespace tessera::tune::dynamic
