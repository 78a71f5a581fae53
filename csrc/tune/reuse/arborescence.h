#pragma once
// Minimum-cost arborescence (Chu-Liu/Edmonds): the cheapest set of edges in which every node but
// the root has exactly one incoming edge and is reachable from the root. ETO's reuse pair
// selection without bridge operators is exactly this problem on the optimization-choice graph
// (choice_graph.h); with bridges it is the inner step of the Steiner tree search (steiner.h).
//
// The recursive form: every node takes its cheapest incoming edge; if those edges form no cycle
// they are the answer, else each cycle is contracted into one node whose incoming edges cost
// what they save over the cycle edge they replace, the smaller graph is solved, and the
// contraction is undone (the cycle keeps all its edges but the one the chosen entering edge
// replaces). O(V E): each level is O(E) and removes at least one node.
#include <optional>
#include <vector>

namespace tessera::tune::reuse {

struct WeightedEdge {
  int from = 0;
  int to = 0;
  double cost = 0;
};

struct Arborescence {
  std::vector<int> edges;   // indices into the edge list given, one per non-root spanned node
  std::vector<int> parent;  // per node: the node its edge comes from; -1 for the root and
                            // for nodes left out (see `include`)
  double cost = 0;          // sum of the chosen edges' costs
};

// The min-cost arborescence rooted at `root` spanning every node `include` marks (all nodes when
// `include` is empty; the root is always in), using only edges between included nodes. Self
// loops and edges into the root are ignored. nullopt when some included node is unreachable from
// the root through included nodes. Ties between equal-cost edges go to the earlier edge.
std::optional<Arborescence> min_arborescence(int num_nodes, int root,
                                             const std::vector<WeightedEdge>& edges,
                                             const std::vector<bool>& include = {});

}  // namespace tessera::tune::reuse
