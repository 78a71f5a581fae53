#include "tune/reuse/choice_graph.h"

namespace tessera::tune::reuse {

std::vector<int> ChoiceGraph::bridge_nodes() const {
  std::vector<int> nodes;
  for (int v = num_operators + 1; v < num_nodes(); ++v) nodes.push_back(v);
  return nodes;
}

ChoiceGraph build_choice_graph(const std::vector<ReuseOperator>& ops,
                               const std::vector<ReuseOperator>& bridges,
                               const TrialEstimateParams& params) {
  std::vector<ReuseOperator> all = ops;
  all.insert(all.end(), bridges.begin(), bridges.end());
  ChoiceGraph g;
  g.num_operators = static_cast<int>(ops.size());
  g.names.push_back("root");
  g.terminal.push_back(false);
  for (size_t i = 0; i < all.size(); ++i) {
    g.names.push_back(all[i].name);
    g.terminal.push_back(i < ops.size());
    g.edges.push_back({ChoiceGraph::kRoot, static_cast<int>(i) + 1, params.full_search_trials});
  }
  for (auto [user, source] : reuse_pairs(all)) {
    g.edges.push_back({source + 1, user + 1, reuse_trials(all[user], all[source], params)});
  }
  return g;
}

}  // namespace tessera::tune::reuse
