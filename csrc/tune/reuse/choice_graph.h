#pragma once
// ETO's optimization-choice (OC) graph (Sec. 6): node 0 is a virtual root, then one node per
// operator to tune (the terminals), then one per bridge operator (optional Steiner nodes). An
// edge root -> v means "v is tuned by a full search"; an edge s -> u means "u is tuned by the
// reuse tuner from s's tuned program" (u reuses s). Costs are estimated measurement trials
// (trial_estimate.h). Every node has a root edge, so every node can be tuned.
#include <string>
#include <vector>

#include "tune/reuse/arborescence.h"
#include "tune/reuse/reuse_condition.h"
#include "tune/reuse/trial_estimate.h"

namespace tessera::tune::reuse {

struct ChoiceGraph {
  static constexpr int kRoot = 0;
  std::vector<std::string> names;  // per node; "root" first
  std::vector<bool> terminal;  // per node: an operator that must be tuned (false: root, bridges)
  std::vector<WeightedEdge> edges;
  int num_operators = 0;  // nodes 1..num_operators are the operators, the rest bridges

  int num_nodes() const { return static_cast<int>(names.size()); }
  int operator_node(int op) const { return 1 + op; }
  bool is_bridge(int node) const { return node > num_operators; }
  std::vector<int> bridge_nodes() const;
};

// Nodes: root, `ops` in order, `bridges` in order. Edges: a root edge per node, and s -> u for
// every reuse pair (u, s) of ops and bridges together.
ChoiceGraph build_choice_graph(const std::vector<ReuseOperator>& ops,
                               const std::vector<ReuseOperator>& bridges = {},
                               const TrialEstimateParams& params = {});

}  // namespace tessera::tune::reuse
