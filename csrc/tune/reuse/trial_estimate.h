#pragma once
// Search cost of the optimization choices, in measurement trials (ETO Sec. 6.1): a full search
// costs its trial budget; tuning operator alpha by reuse of beta's program costs what the reuse
// tuner's hierarchical search (Alg. 1) is expected to measure.
//
// Alg. 1 measures, per task count B in its range, the register-tile counts T in theirs, then the
// outer-reduce shapes (M) in theirs, then the unroll depths and the packing/vector-width
// alternatives: trials = yield * d_B * (d_T + d_M + unroll + pack_width). The ranges are Eq. 1-3
// with r1 = |I(rL_beta)| / |I(rL_alpha)| and r2 = |I(L_alpha)| / |I(L_beta)|, each interval taken
// as [min, max] of its two endpoints (the paper leaves them unordered):
//   B / B_beta in [min(r1, r2), max(r1, r2)],  T / T_beta and M / M_beta in [min(1, r2), max(1,
//   r2)].
// Before beta is tuned its B, T and M are unknown (the paper averages over sampled sizes of
// beta's shapes); only the ranges' span q = max / min is known. The estimate counts the values
// alpha can actually take and assumes they are spread evenly on a log scale:
//   d = min(|values|, 1 + round(density * log2(q))),
//   density = (|values| - 1) / log2(max value / min value)   (values per doubling)
// where the values are, for B and T, the products of divisors of alpha's spatial extents (task
// counts and register-tile counts of tilings without edge tiles), and for M the outer-reduce trip
// counts of an LShape with one axis split (Alg. 1's GetLShape): the divisors of each reduce
// extent.
#include <cstdint>
#include <vector>

#include "schedule/tuning_policy.h"
#include "tune/reuse/reuse_condition.h"

namespace tessera::tune::reuse {

// Chosen constants of the estimate.
struct TrialEstimateParams {
  // Trials of a full search of one operator (the root edge): search mode's budget per kernel
  // (the paper's Ansor budget is 1000).
  double full_search_trials = schedule::tuning_policy().search_trials;
  // Alternatives to the adaptive default tried in the unroll round (reduce_unroll 1..16 in powers
  // of two, less the default).
  double unroll_alternatives = 4;
  // Alternatives tried in the last round: packing toggled per packable operand of a GEMM-like
  // stage (2) and two narrower vector widths.
  double pack_width_alternatives = 4;
  // Share of the enumerated candidates the reuse tuner actually measures (the others fail the
  // space's checks, or repeat a schedule measured already); fitted on BERT-base's reuse edges.
  double candidate_yield = 0.45;
};

// Every product of one divisor per extent, ascending (1 for no extents).
std::vector<int64_t> divisor_products(const std::vector<int64_t>& extents);

// Candidate values among `values` (ascending, distinct) in a range spanning the factor `span`
// (>= 1), by the log-uniform density above.
double values_in_range(const std::vector<int64_t>& values, double span);

// Estimated trials of the reuse tuner tuning `user` from `source`'s program (the two must
// satisfy can_reuse). Not symmetric: the ranges and the values depend on which reuses which.
double reuse_trials(const ReuseOperator& user, const ReuseOperator& source,
                    const TrialEstimateParams& p = {});

}  // namespace tessera::tune::reuse
