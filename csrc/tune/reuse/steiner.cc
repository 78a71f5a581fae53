#include "tune/reuse/steiner.h"

#include "util/check.h"

namespace tessera::tune::reuse {

SteinerTree arborescence_over(const ChoiceGraph& g, const std::vector<bool>& with_bridges) {
  SteinerTree t;
  t.include.assign(g.num_nodes(), false);
  for (int v = 0; v < g.num_nodes(); ++v) {
    const bool bridge_on = !with_bridges.empty() && with_bridges[v] && g.is_bridge(v);
    t.include[v] = v == ChoiceGraph::kRoot || g.terminal[v] || bridge_on;
  }
  std::optional<Arborescence> a =
      min_arborescence(g.num_nodes(), ChoiceGraph::kRoot, g.edges, t.include);
  TESSERA_CHECK(a.has_value()) << "reuse: some operator of the choice graph has no root edge";
  t.tree = std::move(*a);
  t.evaluations = 1;
  return t;
}

SteinerTree exact_steiner_tree(const ChoiceGraph& g) {
  const std::vector<int> bridges = g.bridge_nodes();
  const int b = static_cast<int>(bridges.size());
  TESSERA_CHECK(b <= kMaxExactBridges)
      << "reuse: exact Steiner tree over " << b << " bridges (at most " << kMaxExactBridges << ")";
  SteinerTree best;
  int evaluations = 0;
  for (uint64_t mask = 0; mask < (uint64_t{1} << b); ++mask) {
    std::vector<bool> on(g.num_nodes(), false);
    for (int k = 0; k < b; ++k) on[bridges[k]] = (mask >> k) & 1;
    SteinerTree t = arborescence_over(g, on);
    ++evaluations;
    if (mask == 0 || t.tree.cost < best.tree.cost) best = std::move(t);
  }
  best.evaluations = evaluations;
  return best;
}

SteinerTree greedy_steiner_tree(const ChoiceGraph& g) {
  std::vector<bool> on(g.num_nodes(), false);
  SteinerTree best = arborescence_over(g, on);
  int evaluations = 1;
  for (;;) {
    int best_move = -1;
    SteinerTree best_after;
    for (int v : g.bridge_nodes()) {
      on[v] = !on[v];
      SteinerTree t = arborescence_over(g, on);
      ++evaluations;
      on[v] = !on[v];
      const double to_beat = best_move < 0 ? best.tree.cost : best_after.tree.cost;
      if (t.tree.cost < to_beat) {
        best_move = v;
        best_after = std::move(t);
      }
    }
    if (best_move < 0) break;
    on[best_move] = !on[best_move];
    best = std::move(best_after);
  }
  best.evaluations = evaluations;
  return best;
}

}  // namespace tessera::tune::reuse
