#pragma once
// Diversity-aware choice of a round's measurements (AutoTVM's diversity-aware exploration, Chen
// et al., "Learning to Optimize Tensor Programs", 2018): of the model's best-ranked candidates
// (a pool a few times larger than the round's picks), the picks are made greedily, each the
// candidate that adds the most (knob, value) pairs not covered by the picks before it, the
// better-ranked on ties; once every pair is covered, the rest go in rank order.
//
// Why: a model ranks schedules that differ only in knobs it sees little of (a prefetch hint, a
// loop order, packing on or off) within a hair of each other, so its best 64 can be one tiling
// 33 times over (seen on a depthwise convolution), and a round measures one idea instead of 64.
#include <string>
#include <vector>

#include "schedule/annotation.h"

namespace tessera::tune::search {

// The schedule's knobs as "path=value" strings: every leaf of its stages' and plan's JSON (an
// array is one value, as a split's factors are one knob) and its layouts.
std::vector<std::string> schedule_knobs(const schedule::KernelSchedule& s);

// Per schedule its knobs, where a knob some other schedule sets and this one leaves out (JSON
// omits defaults, e.g. "prefetch" when off) counts as the value "path=-": a default is a value to
// cover like any other.
std::vector<std::vector<std::string>> knobs_of(const std::vector<schedule::KernelSchedule>& all);

// Indices of up to n candidates, given best-ranked first as their knob lists, in pick order
// (see the header comment).
std::vector<size_t> pick_for_coverage(const std::vector<std::vector<std::string>>& knobs, int n);

}  // namespace tessera::tune::search
