#pragma once
// ETO's reuse pair selector (Sec. 6) and the Selective Tuning TopK baseline: which operators a
// full search tunes, which the reuse tuner tunes from which other operator's program, in which
// order, and at what estimated cost in measurement trials.
#include <string>
#include <vector>

#include "tune/reuse/choice_graph.h"
#include "tune/reuse/reuse_condition.h"
#include "tune/reuse/trial_estimate.h"

namespace tessera::tune::reuse {

enum class SelectionMethod {
  kArborescence,   // no bridges: min arborescence of the choice graph
  kGreedyBridges,  // one-hop bridges, greedy Steiner tree (ETO's default)
  kExactBridges,   // one-hop bridges, exact Steiner tree by enumeration (small sets)
  kTopK,           // Selective Tuning's baseline (select_top_k with kTopKPrograms), no reuse tuner
};

// The method named "arborescence", "greedy", "exact" or "topk"; throws tessera::Error otherwise.
SelectionMethod selection_method_from_name(const std::string& name);

// Selective Tuning's K: programs of a group's searched operator each other member tries.
constexpr int kTopKPrograms = 3;

// One operator to tune (an input operator or a bridge the selection uses).
struct TuningStep {
  std::string name;
  std::vector<int64_t> extents;
  bool bridge = false;
  int source = -1;    // index into ReuseSelection::steps of the program it reuses; -1: full search
  double trials = 0;  // estimated trials of this step
  std::vector<int> joins;  // a bridge: the input operators it joins (ReuseOperator::joins)
};

struct ReuseSelection {
  // Tuning order: a step comes after the step it reuses. The input operators come first in
  // their own order when possible; bridges are listed where they are needed.
  std::vector<TuningStep> steps;
  std::vector<int> step_of_operator;  // input operator i -> its step
  double total_trials = 0;
  int full_searches = 0;

  std::string describe() const;  // one line per step, for logs and test failures
};

// kTopK: select_top_k(ops, kTopKPrograms, params).
ReuseSelection select_reuse(const std::vector<ReuseOperator>& ops, SelectionMethod method,
                            const TrialEstimateParams& params = {});

// Selective Tuning's TopK baseline (the paper's "ST"): operators of one kind (same type, sketch
// set and loop count; no domination needed, TopK applies programs as they are) form a group; the
// group's largest operator (most iteration points, first on ties) is tuned by a full search and
// every other member tries that search's best `k` programs, costing k trials.
ReuseSelection select_top_k(const std::vector<ReuseOperator>& ops, int k = 3,
                            const TrialEstimateParams& params = {});

}  // namespace tessera::tune::reuse
