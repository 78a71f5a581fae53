#pragma once
// Paired timing: Tessera's one noise rule for choosing between implementations by measurement.
// Tuning candidates (construct, search), a partition's Tessera kernel against ATen, a compiled
// graph against eager and the benchmarks all compare through time_paired (Python: tessera.timing).
//
// The rule. Background load on a shared machine comes in bursts that slow some calls and not
// others, so implementations are never compared by times taken at different moments:
//  - Time runs in rounds. A round of an implementation calls it for about round_ms (at least
//    min_calls calls, after one untimed call, since another implementation ran last; one call
//    when calls last a round) and keeps the median call.
//  - Every round of a candidate sits between two rounds of the reference, and its ratio for
//    that round is its median over the mean of the two reference medians: a burst that spans the
//    pair cancels, one that starts or ends next to the candidate counts half.
//  - A candidate's score is the median of its round ratios; its time is that ratio times the
//    reference's median over all its rounds.
//  - A challenger replaces the incumbent only when its score is below the policy's win margin
//    (schedule::TuningPolicy::win_margin): within the noise, the incumbent stays.
#include <functional>
#include <string>
#include <vector>

namespace tessera::runtime {

struct PairedTimingOptions {
  int rounds = 3;           // timing rounds per candidate (the budget may cut them short)
  int min_rounds = 1;       // rounds always run, whatever the budget
  double round_ms = 5;      // a round lasts about this long...
  int min_calls = 2;        // ...and has at least this many timed calls (1 for long calls)
  double budget_ms = 2500;  // rounds past min_rounds stop once all rounds took this long
  // After the rounds, the `finalists` best candidates by score get final_rounds more rounds
  // (within final_budget_ms), when there are more candidates than that: a few rounds separate
  // near-equal candidates only by luck. 0 turns it off.
  int finalists = 0;
  int final_rounds = 4;
  double final_budget_ms = 1500;
  // A candidate whose first-round ratio is above this is not timed further (0: never dropped).
  double drop_ratio = 0;
};

struct PairedTiming {
  bool reference_ok = false;
  std::string reference_error;  // why the reference failed (then no candidate has a score)
  double reference_ms = 0;      // median of the reference's round medians
  int reference_rounds = 0;
  int reference_calls = 0;  // timed calls of the reference
  // Per candidate, in the given order. A failed candidate (it threw) has ok false, its error,
  // and ratio +inf.
  std::vector<bool> ok;
  std::vector<std::string> error;
  std::vector<double> ratio;      // median round ratio to the reference
  std::vector<double> median_ms;  // ratio x reference_ms
  std::vector<int> rounds;        // rounds timed
  std::vector<int> calls;         // timed calls over all rounds
  std::vector<bool> dropped;      // stopped after its first round (drop_ratio)
};

// Times `candidates` against `reference` by the rule above. Exceptions from a candidate are
// caught and reported per candidate; from the reference, in reference_error.
PairedTiming time_paired(const std::function<void()>& reference,
                         const std::vector<std::function<void()>>& candidates,
                         const PairedTimingOptions& options = {});

// Index of the candidate that replaces the incumbent (-1: the incumbent stays): the best score,
// if below win_margin.
int paired_winner(const PairedTiming& timing, double win_margin);

}  // namespace tessera::runtime
