#pragma once
// The narrowed annotation space of ETO's reuse tuner (Alg. 1) for one reuse pair: the feature
// ranges of Eq. 1-3 around the source program's features, and the candidate annotations of the
// anchor stage with given shapes. Every candidate keeps the source's sketch (its plan choices,
// the anchor's sketch, vector axis, packing, parallel flag and loop order); only numbers change.
//
// Ranges (interval endpoints unordered in the paper: [min, max] of the two), with
// r1 = |I(rL_src)| / |I(rL_user)| and r2 = |I(L_user)| / |I(L_src)|:
//   B in B_src * [min(r1, r2), max(r1, r2)]
//   T in T_src * [min(1, r2), max(1, r2)]
//   M in M_src * [min(1, r2), max(1, r2)]
#include <cstdint>
#include <string>
#include <vector>

#include "schedule/annotation.h"
#include "schedule/stage_plan.h"
#include "tune/gensor/stage_space.h"
#include "tune/reuse/reuse_condition.h"
#include "tune/reuse/reuse_features.h"

namespace tessera::tune::reuse {

struct Range {
  double lo = 0;
  double hi = 0;
  bool contains(double x) const;  // with a relative tolerance for rounding
};

struct FeatureRanges {
  Range tasks;           // B
  Range register_tiles;  // T
  Range panel_bytes;     // M
};

FeatureRanges feature_ranges(const ReuseOperator& user, const ReuseOperator& source,
                             const ReuseFeatures& source_features);

// The members of `values` (ascending) inside `r`; when none is, the one nearest to it on a log
// scale (a range can fall between two achievable values; Alg. 1 still needs one).
std::vector<int64_t> values_within(const std::vector<int64_t>& values, const Range& r);

// Task counts (B) the user's stage can take without edge tiles: products of divisors of its
// spatial extents.
std::vector<int64_t> task_counts(const gensor::StageSpace& sp);

// Outer-reduce shapes with one axis split into a divisor of its extent (GetLShape's family):
// every reduce axis unsplit first, then each axis's splits in ascending order.
std::vector<std::vector<int64_t>> lshape_choices(const gensor::StageSpace& sp);

// `names` (tensors of the kernel planned by `from`, e.g. an annotation's packed operands) as the
// tensors at the same place in the kernel planned by `to`: kernel inputs by input position,
// temporaries by temporary position. Operators of one kind have their operands in the same
// places, whatever their names. Throws tessera::Error for a name that is neither.
std::vector<std::string> translate_operands(const std::vector<std::string>& names,
                                            const schedule::StagePlan& from,
                                            const schedule::StagePlan& to);

// The source's anchor annotation `base` with these shapes (GetS): cache tile = bshape, register
// tile = tshape, no mid level, reduce tile = extent / trips, and the vector width the register
// tile allows (at most base's). Unroll depth is base's, clamped to the new reduce tile.
schedule::StageAnnotation annotation_with_shapes(const schedule::StageAnnotation& base,
                                                 const gensor::StageSpace& sp,
                                                 const std::vector<int64_t>& bshape,
                                                 const std::vector<int64_t>& tshape,
                                                 const std::vector<int64_t>& lshape);

}  // namespace tessera::tune::reuse
