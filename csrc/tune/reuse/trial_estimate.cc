#include "tune/reuse/trial_estimate.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "util/check.h"
#include "util/divisors.h"

namespace tessera::tune::reuse {

namespace {

// max/min of two positive ratios: the span of the interval they bound.
double span_of(double a, double b) { return std::max(a, b) / std::min(a, b); }

// Outer-reduce trip counts of LShapes that split one reduce axis (1 included).
std::vector<int64_t> lshape_values(const ReuseOperator& op) {
  std::set<int64_t> v = {1};
  for (size_t i = static_cast<size_t>(op.num_spatial); i < op.extents.size(); ++i) {
    for (int64_t d : util::divisors(op.extents[i])) v.insert(d);
  }
  return {v.begin(), v.end()};
}

}  // namespace

std::vector<int64_t> divisor_products(const std::vector<int64_t>& extents) {
  std::set<int64_t> products = {1};
  for (int64_t e : extents) {
    TESSERA_CHECK(e >= 1) << "reuse: extent " << e << " < 1";
    std::set<int64_t> next;
    for (int64_t p : products) {
      for (int64_t d : util::divisors(e)) next.insert(p * d);
    }
    products = std::move(next);
  }
  return {products.begin(), products.end()};
}

double values_in_range(const std::vector<int64_t>& values, double span) {
  TESSERA_CHECK(span >= 1) << "reuse: a range span is a factor >= 1, got " << span;
  TESSERA_CHECK(!values.empty()) << "reuse: no feature values";
  const double count = static_cast<double>(values.size());
  if (values.size() == 1) return 1;
  const double doublings =
      std::log2(static_cast<double>(values.back()) / static_cast<double>(values.front()));
  const double density = (count - 1) / doublings;
  return std::min(count, 1 + std::round(density * std::log2(span)));
}

double reuse_trials(const ReuseOperator& user, const ReuseOperator& source,
                    const TrialEstimateParams& p) {
  TESSERA_CHECK(can_reuse(user, source))
      << "reuse: " << user.name << " cannot reuse " << source.name << " (Def. 2)";
  const double r1 = source.reduce_points() / user.reduce_points();
  const double r2 = user.points() / source.points();
  const std::vector<int64_t> spatial(user.extents.begin(), user.extents.begin() + user.num_spatial);
  const std::vector<int64_t> tile_counts = divisor_products(spatial);
  const double d_b = values_in_range(tile_counts, span_of(r1, r2));
  const double d_t = values_in_range(tile_counts, span_of(1, r2));
  const double d_m = values_in_range(lshape_values(user), span_of(1, r2));
  return p.candidate_yield * d_b * (d_t + d_m + p.unroll_alternatives + p.pack_width_alternatives);
}

}  // namespace tessera::tune::reuse
