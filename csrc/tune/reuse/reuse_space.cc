#include "tune/reuse/reuse_space.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "tune/reuse/trial_estimate.h"
#include "util/check.h"

namespace tessera::tune::reuse {

namespace {

// Rounding slack of range tests: features are products of integers, ranges products of ratios.
constexpr double kRangeTolerance = 1e-9;

Range between(double a, double b) { return {std::min(a, b), std::max(a, b)}; }

Range scaled(const Range& r, double s) { return {r.lo * s, r.hi * s}; }

// Distance from x to r on a log scale (0 inside).
double log_gap(double x, const Range& r) {
  if (x < r.lo) return std::log(r.lo / x);
  if (x > r.hi) return std::log(x / r.hi);
  return 0;
}

}  // namespace

bool Range::contains(double x) const {
  return x >= lo * (1 - kRangeTolerance) && x <= hi * (1 + kRangeTolerance);
}

FeatureRanges feature_ranges(const ReuseOperator& user, const ReuseOperator& source,
                             const ReuseFeatures& source_features) {
  const double r1 = source.reduce_points() / user.reduce_points();
  const double r2 = user.points() / source.points();
  FeatureRanges f;
  f.tasks = scaled(between(r1, r2), source_features.tasks);
  f.register_tiles = scaled(between(1, r2), source_features.register_tiles);
  f.panel_bytes = scaled(between(1, r2), source_features.panel_bytes);
  return f;
}

std::vector<int64_t> values_within(const std::vector<int64_t>& values, const Range& r) {
  std::vector<int64_t> in;
  for (int64_t v : values) {
    if (r.contains(static_cast<double>(v))) in.push_back(v);
  }
  if (!in.empty() || values.empty()) return in;
  int64_t nearest = values.front();
  for (int64_t v : values) {
    if (log_gap(static_cast<double>(v), r) < log_gap(static_cast<double>(nearest), r)) nearest = v;
  }
  return {nearest};
}

std::vector<int64_t> task_counts(const gensor::StageSpace& sp) {
  return divisor_products({sp.extents.begin(), sp.extents.begin() + sp.num_spatial});
}

std::vector<std::vector<int64_t>> lshape_choices(const gensor::StageSpace& sp) {
  std::vector<std::vector<int64_t>> out = {std::vector<int64_t>(sp.num_reduce, 1)};
  for (int r = 0; r < sp.num_reduce; ++r) {
    const int64_t extent = sp.extents[sp.num_spatial + r];
    for (int64_t trips = 2; trips <= extent; ++trips) {
      if (extent % trips != 0) continue;
      std::vector<int64_t> l(sp.num_reduce, 1);
      l[r] = trips;
      out.push_back(std::move(l));
    }
  }
  return out;
}

namespace {

// Index of the tensor named `name` in `list`, or -1.
int position_of(const std::string& name, const std::vector<ir::Tensor>& list) {
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i]->name == name) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace

std::vector<std::string> translate_operands(const std::vector<std::string>& names,
                                            const schedule::StagePlan& from,
                                            const schedule::StagePlan& to) {
  std::vector<std::string> out;
  for (const std::string& name : names) {
    const int input = position_of(name, from.inputs);
    const int temporary = position_of(name, from.temporaries);
    if (input >= 0 && input < static_cast<int>(to.inputs.size())) {
      out.push_back(to.inputs[input]->name);
    } else if (temporary >= 0 && temporary < static_cast<int>(to.temporaries.size())) {
      out.push_back(to.temporaries[temporary]->name);
    } else {
      TESSERA_FAIL() << "reuse: operand " << name << " has no counterpart in the other kernel";
    }
  }
  return out;
}

schedule::StageAnnotation annotation_with_shapes(const schedule::StageAnnotation& base,
                                                 const gensor::StageSpace& sp,
                                                 const std::vector<int64_t>& bshape,
                                                 const std::vector<int64_t>& tshape,
                                                 const std::vector<int64_t>& lshape) {
  TESSERA_CHECK(static_cast<int>(bshape.size()) == sp.num_spatial &&
                bshape.size() == tshape.size() && static_cast<int>(lshape.size()) == sp.num_reduce)
      << "reuse: shapes do not match the axes of " << sp.op_name;
  schedule::StageAnnotation ann = base;
  ann.op = sp.op_name;
  ann.tile_outer = bshape;
  ann.tile_reg = tshape;
  ann.tile_mid.clear();
  ann.tile_reduce.clear();
  int64_t shortest_reduce_tile = 0;
  for (int r = 0; r < sp.num_reduce; ++r) {
    const int64_t extent = sp.extents[sp.num_spatial + r];
    ann.tile_reduce.push_back((extent + lshape[r] - 1) / lshape[r]);
    shortest_reduce_tile =
        r == 0 ? ann.tile_reduce[r] : std::min(shortest_reduce_tile, ann.tile_reduce[r]);
  }
  if (ann.vector_axis >= 0) {
    ann.vector_width =
        std::min(base.vector_width, gensor::vector_width_for(tshape[ann.vector_axis], sp.lanes));
  }
  if (sp.num_reduce > 0) ann.reduce_unroll = std::min(base.reduce_unroll, shortest_reduce_tile);
  return ann;
}

}  // namespace tessera::tune::reuse
