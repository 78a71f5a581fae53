#pragma once
// Reuse pair selection with bridge operators (ETO Sec. 6.2): a minimum directed Steiner tree of
// the optimization-choice graph, rooted at the root, spanning every terminal (the operators to
// tune) and any subset of the bridges. NP-hard in general (the paper reduces directed Steiner
// tree to it); two solvers:
//
//   exact   every subset S of the bridges, scored by the min arborescence over root + terminals
//           + S; the cheapest wins. Exact because an optimal Steiner tree is a spanning
//           arborescence of its own node set, which the subset equal to its bridges finds (or
//           beats). 2^|bridges| arborescences: for small graphs and for checking the greedy one.
//   greedy  best-improvement local search over the bridge set: start with no bridge; while
//           adding or removing one bridge lowers the min-arborescence cost, apply the move that
//           lowers it most. Never worse than selection without bridges; O(b) arborescences per
//           move. (The paper uses Watel and Weisser's greedy approximation; this is a simpler
//           greedy over the same inner solver, checked against `exact` in the tests.)
#include <vector>

#include "tune/reuse/arborescence.h"
#include "tune/reuse/choice_graph.h"

namespace tessera::tune::reuse {

struct SteinerTree {
  Arborescence tree;          // over the included nodes; parent[v] == -1 for nodes left out
  std::vector<bool> include;  // per node: root, every terminal, and the bridges used
  int evaluations = 0;        // min-arborescence computations spent
};

// Most bridges exact_steiner_tree enumerates (2^20 arborescences).
inline constexpr int kMaxExactBridges = 20;

// Throws tessera::Error when the graph has more than kMaxExactBridges bridges.
SteinerTree exact_steiner_tree(const ChoiceGraph& g);
SteinerTree greedy_steiner_tree(const ChoiceGraph& g);

// The min arborescence over root + terminals (+ the bridges `with_bridges` marks, per node;
// empty: none). Throws when a terminal is unreachable (a graph from build_choice_graph never has
// one: every node has a root edge).
SteinerTree arborescence_over(const ChoiceGraph& g, const std::vector<bool>& with_bridges = {});

}  // namespace tessera::tune::reuse
