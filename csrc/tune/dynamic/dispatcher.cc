#include "tune/dynamic/dispatcher.h"

#include <algorithm>
#include <numeric>

#include "util/check.h"

namespace tessera::tune::dynamic {

using util::Json;

namespace {

// First value of the gap (a, b) that is nearer to b than to a (ties stay with a).
int64_t upper_half_start(int64_t a, int64_t b) { return a + (b - a) / 2 + 1; }

void check_labels(size_t points, const std::vector<int>& labels) {
  TESSERA_CHECK(points > 0 && labels.size() == points)
      << "dispatcher needs one label per sample point (" << labels.size() << " for " << points
      << ")";
  for (int l : labels) TESSERA_CHECK(l >= 0) << "dispatcher labels are kernel indices (>= 0)";
}

}  // namespace

IntervalTable IntervalTable::build(const std::vector<int64_t>& values,
                                   const std::vector<int>& labels, SizeRange range,
                                   const DispatchConstants& constants) {
  check_labels(values.size(), labels);
  std::vector<std::pair<int64_t, int>> samples;
  for (size_t i = 0; i < values.size(); ++i) {
    TESSERA_CHECK(range.contains(values[i]))
        << "sample size " << values[i] << " outside [" << range.lo << ", " << range.hi << "]";
    samples.push_back({values[i], labels[i]});
  }
  std::sort(samples.begin(), samples.end());
  IntervalTable t;
  t.range_ = range;
  t.starts_.push_back(range.lo);
  t.labels_.push_back(samples[0].second);
  for (size_t i = 1; i < samples.size(); ++i) {
    TESSERA_CHECK(samples[i].first != samples[i - 1].first)
        << "sample size " << samples[i].first << " given twice";
    if (samples[i].second == t.labels_.back()) continue;
    t.starts_.push_back(upper_half_start(samples[i - 1].first, samples[i].first));
    t.labels_.push_back(samples[i].second);
  }
  if (range.count() <= constants.max_direct_entries) {
    t.direct_.resize(static_cast<size_t>(range.count()));
    for (int64_t v = range.lo; v <= range.hi; ++v) {
      t.direct_[static_cast<size_t>(v - range.lo)] = t.lookup_interval(v);
    }
  }
  return t;
}

int IntervalTable::lookup_interval(int64_t v) const {
  // The last interval starting at or before v (starts_[0] == range_.lo <= v).
  const auto it = std::upper_bound(starts_.begin(), starts_.end(), v);
  return labels_[static_cast<size_t>(it - starts_.begin()) - 1];
}

namespace {

// n times the Gini impurity of a node with `counts` points per label (n of them in all).
double gini_weighted(const std::vector<int>& counts, int n) {
  if (n == 0) return 0;
  double sum_sq = 0;
  for (int c : counts) sum_sq += static_cast<double>(c) * c;
  return n - sum_sq / n;  // n * (1 - sum (c/n)^2)
}

}  // namespace

DecisionTree DecisionTree::build(const std::vector<SizePoint>& points,
                                 const std::vector<int>& labels, std::vector<SizeRange> ranges) {
  check_labels(points.size(), labels);
  for (const SizePoint& p : points) {
    TESSERA_CHECK(p.size() == ranges.size()) << "sample point with the wrong number of sizes";
    for (size_t a = 0; a < p.size(); ++a) {
      TESSERA_CHECK(ranges[a].contains(p[a])) << "sample point outside the tuned ranges";
    }
  }
  DecisionTree t;
  t.ranges_ = std::move(ranges);
  std::vector<size_t> all(points.size());
  std::iota(all.begin(), all.end(), 0);
  t.grow(std::move(all), points, labels);
  return t;
}

// Appends the subtree of the points `idx` and returns its node index. Invariant: the points of
// one node are distinct, so an impure node always has an axis with two values to split between.
int DecisionTree::grow(std::vector<size_t> idx, const std::vector<SizePoint>& points,
                       const std::vector<int>& labels) {
  const int self = static_cast<int>(nodes_.size());
  nodes_.push_back(Node{});
  int max_label = 0;
  for (size_t i : idx) max_label = std::max(max_label, labels[i]);
  std::vector<int> total(static_cast<size_t>(max_label) + 1, 0);
  for (size_t i : idx) ++total[static_cast<size_t>(labels[i])];
  // The most frequent label (the smallest of equals).
  nodes_[self].label =
      static_cast<int>(std::max_element(total.begin(), total.end()) - total.begin());
  if (std::count_if(total.begin(), total.end(), [](int c) { return c > 0; }) == 1) return self;

  // Per axis, one sweep over the points sorted by their value on it: the label counts left of
  // each gap between neighbouring values give that threshold's score (O(n log n) per axis).
  const int n = static_cast<int>(idx.size());
  int best_axis = -1;
  int64_t best_threshold = 0;
  double best_score = 0;
  std::vector<int> left(total.size()), right(total.size());
  for (size_t a = 0; a < ranges_.size(); ++a) {
    std::vector<std::pair<int64_t, int>> sorted;  // (value on axis a, label)
    for (size_t i : idx) sorted.push_back({points[i][a], labels[i]});
    std::sort(sorted.begin(), sorted.end());
    std::fill(left.begin(), left.end(), 0);
    for (int j = 0; j + 1 < n; ++j) {
      ++left[static_cast<size_t>(sorted[j].second)];
      if (sorted[j + 1].first == sorted[j].first) continue;
      for (size_t l = 0; l < total.size(); ++l) right[l] = total[l] - left[l];
      const double score = gini_weighted(left, j + 1) + gini_weighted(right, n - j - 1);
      if (best_axis < 0 || score < best_score - 1e-12) {
        best_axis = static_cast<int>(a);
        best_threshold = upper_half_start(sorted[j].first, sorted[j + 1].first);
        best_score = score;
      }
    }
  }
  TESSERA_CHECK(best_axis >= 0) << "decision tree: impure node with identical points";
  std::vector<size_t> lo, hi;
  for (size_t i : idx) (points[i][best_axis] < best_threshold ? lo : hi).push_back(i);
  const int left_child = grow(std::move(lo), points, labels);
  const int right_child = grow(std::move(hi), points, labels);
  nodes_[self].axis = best_axis;
  nodes_[self].threshold = best_threshold;
  nodes_[self].left = left_child;
  nodes_[self].right = right_child;
  return self;
}

int DecisionTree::lookup(const int64_t* sizes) const {
  for (size_t a = 0; a < ranges_.size(); ++a) {
    if (!ranges_[a].contains(sizes[a])) return kFallback;
  }
  int n = 0;
  while (nodes_[n].axis >= 0) {
    n = sizes[nodes_[n].axis] < nodes_[n].threshold ? nodes_[n].left : nodes_[n].right;
  }
  return nodes_[n].label;
}

int DecisionTree::depth() const {
  std::vector<int> d(nodes_.size(), 1);
  int deepest = nodes_.empty() ? 0 : 1;
  for (size_t n = 0; n < nodes_.size(); ++n) {  // children come after their parent
    if (nodes_[n].axis < 0) continue;
    d[nodes_[n].left] = d[nodes_[n].right] = d[n] + 1;
    deepest = std::max(deepest, d[n] + 1);
  }
  return deepest;
}

Dispatcher Dispatcher::build(const std::vector<SizePoint>& points, const std::vector<int>& labels,
                             const std::vector<SizeRange>& ranges,
                             const DispatchConstants& constants) {
  check_labels(points.size(), labels);
  Dispatcher d;
  d.axes_ = ranges.size();
  if (d.axes_ == 0) {
    d.single_ = labels[0];
  } else if (d.axes_ == 1) {
    std::vector<int64_t> values;
    for (const SizePoint& p : points) {
      TESSERA_CHECK(p.size() == 1) << "sample point with the wrong number of sizes";
      values.push_back(p[0]);
    }
    d.table_ = IntervalTable::build(values, labels, ranges[0], constants);
  } else {
    d.tree_ = DecisionTree::build(points, labels, ranges);
  }
  return d;
}

int Dispatcher::lookup(const SizePoint& sizes) const {
  TESSERA_CHECK(sizes.size() == axes_)
      << "dispatch with " << sizes.size() << " sizes for " << axes_ << " axes";
  return lookup(sizes.data());
}

int Dispatcher::max_label() const {
  if (axes_ == 0) return single_;
  if (axes_ == 1) return *std::max_element(table_.labels().begin(), table_.labels().end());
  int m = 0;
  for (const DecisionTree::Node& n : tree_.nodes()) {
    if (n.axis < 0) m = std::max(m, n.label);
  }
  return m;
}

namespace {

Json range_json(const SizeRange& r) { return Json::array({Json(r.lo), Json(r.hi)}); }
SizeRange range_from(const Json& j) {
  TESSERA_CHECK(j.is_array() && j.size() == 2) << "dispatcher: malformed range";
  return {j.at(size_t{0}).as_int(), j.at(size_t{1}).as_int()};
}

}  // namespace

Json Dispatcher::to_json() const {
  Json j = Json::object();
  j["axes"] = Json(static_cast<int64_t>(axes_));
  if (axes_ == 0) {
    j["single"] = Json(single_);
  } else if (axes_ == 1) {
    j["range"] = range_json(table_.range());
    Json starts = Json::array(), labels = Json::array();
    for (int64_t s : table_.starts()) starts.push_back(Json(s));
    for (int l : table_.labels()) labels.push_back(Json(l));
    j["starts"] = starts;
    j["labels"] = labels;
  } else {
    Json ranges = Json::array(), nodes = Json::array();
    for (const SizeRange& r : tree_.ranges()) ranges.push_back(range_json(r));
    for (const DecisionTree::Node& n : tree_.nodes()) {
      nodes.push_back(Json::array(
          {Json(n.axis), Json(n.threshold), Json(n.left), Json(n.right), Json(n.label)}));
    }
    j["ranges"] = ranges;
    j["nodes"] = nodes;
  }
  return j;
}

Dispatcher Dispatcher::from_json(const Json& j) {
  try {
    Dispatcher d;
    d.axes_ = static_cast<size_t>(j.at("axes").as_int());
    if (d.axes_ == 0) {
      d.single_ = static_cast<int>(j.at("single").as_int());
      TESSERA_CHECK(d.single_ >= 0) << "dispatcher: negative kernel index";
    } else if (d.axes_ == 1) {
      // Rebuilt from the intervals' starts as samples: each start keeps its label, and the
      // halfway rule puts no sample between two starts, so the boundaries are the same.
      const Json& starts = j.at("starts");
      const Json& labels = j.at("labels");
      TESSERA_CHECK(starts.size() == labels.size() && starts.size() > 0)
          << "dispatcher: malformed intervals";
      IntervalTable t;
      t.range_ = range_from(j.at("range"));
      for (size_t i = 0; i < starts.size(); ++i) {
        t.starts_.push_back(starts.at(i).as_int());
        t.labels_.push_back(static_cast<int>(labels.at(i).as_int()));
        TESSERA_CHECK(t.labels_.back() >= 0) << "dispatcher: negative kernel index";
        TESSERA_CHECK(i == 0 ? t.starts_[0] == t.range_.lo : t.starts_[i] > t.starts_[i - 1])
            << "dispatcher: interval starts out of order";
      }
      if (t.range_.count() <= DispatchConstants{}.max_direct_entries) {
        t.direct_.resize(static_cast<size_t>(t.range_.count()));
        for (int64_t v = t.range_.lo; v <= t.range_.hi; ++v) {
          t.direct_[static_cast<size_t>(v - t.range_.lo)] = t.lookup_interval(v);
        }
      }
      d.table_ = std::move(t);
    } else {
      for (const Json& r : j.at("ranges").as_array()) d.tree_.ranges_.push_back(range_from(r));
      TESSERA_CHECK(d.tree_.ranges_.size() == d.axes_) << "dispatcher: ranges per axis";
      const Json::Array& nodes = j.at("nodes").as_array();
      const int count = static_cast<int>(nodes.size());
      for (int i = 0; i < count; ++i) {
        const Json& n = nodes[static_cast<size_t>(i)];
        DecisionTree::Node node{
            static_cast<int>(n.at(size_t{0}).as_int()), n.at(size_t{1}).as_int(),
            static_cast<int>(n.at(size_t{2}).as_int()), static_cast<int>(n.at(size_t{3}).as_int()),
            static_cast<int>(n.at(size_t{4}).as_int())};
        // Children after their parent: lookups always terminate.
        const bool leaf = node.axis < 0;
        TESSERA_CHECK(leaf ? node.label >= 0
                           : node.axis < static_cast<int>(d.axes_) && node.left > i &&
                                 node.right > i && node.left < count && node.right < count)
            << "dispatcher: malformed tree node " << i;
        d.tree_.nodes_.push_back(node);
      }
      TESSERA_CHECK(!d.tree_.nodes_.empty()) << "dispatcher: empty tree";
    }
    return d;
  } catch (const util::JsonError& e) {
    TESSERA_CHECK(false) << "dispatcher: malformed JSON: " << e.what();
  }
  return {};
}

}  // namespace tessera::tune::dynamic
