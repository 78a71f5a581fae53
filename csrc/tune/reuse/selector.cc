#include "tune/reuse/selector.h"

#include <functional>
#include <sstream>

#include "tune/reuse/steiner.h"
#include "util/check.h"

namespace tessera::tune::reuse {

namespace {

SteinerTree solve(const ChoiceGraph& g, SelectionMethod method) {
  switch (method) {
    case SelectionMethod::kArborescence:
      return arborescence_over(g);
    case SelectionMethod::kGreedyBridges:
      return greedy_steiner_tree(g);
    case SelectionMethod::kExactBridges:
      return exact_steiner_tree(g);
    case SelectionMethod::kTopK:
      break;  // select_reuse hands it to select_top_k
  }
  TESSERA_FAIL() << "reuse: unknown selection method";
}

// Appends node v's step after the step of its parent (parents first, recursively).
class StepOrder {
 public:
  StepOrder(const ChoiceGraph& g, const SteinerTree& t, const std::vector<ReuseOperator>& nodes)
      : g_(g), t_(t), nodes_(nodes), step_of_node_(g.num_nodes(), -1) {}

  int add(int v) {
    if (step_of_node_[v] >= 0) return step_of_node_[v];
    const int parent = t_.tree.parent[v];
    TESSERA_CHECK(parent >= 0) << "reuse: node " << g_.names[v] << " is not in the tree";
    const int source = parent == ChoiceGraph::kRoot ? -1 : add(parent);
    TuningStep s;
    s.name = g_.names[v];
    s.extents = nodes_[v - 1].extents;
    s.bridge = g_.is_bridge(v);
    s.joins = nodes_[v - 1].joins;
    s.source = source;
    s.trials = edge_cost(parent, v);
    step_of_node_[v] = static_cast<int>(sel_.steps.size());
    sel_.steps.push_back(std::move(s));
    sel_.total_trials += sel_.steps.back().trials;
    if (source < 0) ++sel_.full_searches;
    return step_of_node_[v];
  }

  ReuseSelection finish() {
    for (int i = 0; i < g_.num_operators; ++i) sel_.step_of_operator.push_back(add(1 + i));
    return std::move(sel_);
  }

 private:
  double edge_cost(int from, int to) const {
    for (int e : t_.tree.edges) {
      if (g_.edges[e].from == from && g_.edges[e].to == to) return g_.edges[e].cost;
    }
    TESSERA_FAIL() << "reuse: no tree edge " << from << " -> " << to;
  }

  const ChoiceGraph& g_;
  const SteinerTree& t_;
  const std::vector<ReuseOperator>& nodes_;
  std::vector<int> step_of_node_;
  ReuseSelection sel_;
};

}  // namespace

SelectionMethod selection_method_from_name(const std::string& name) {
  if (name == "arborescence") return SelectionMethod::kArborescence;
  if (name == "greedy") return SelectionMethod::kGreedyBridges;
  if (name == "exact") return SelectionMethod::kExactBridges;
  TESSERA_CHECK(name == "topk") << "reuse selection must be 'arborescence', 'greedy', 'exact' or "
                                << "'topk', got '" << name << "'";
  return SelectionMethod::kTopK;
}

std::string ReuseSelection::describe() const {
  std::ostringstream os;
  os << "total " << total_trials << " trials, " << full_searches << " full searches\n";
  for (size_t i = 0; i < steps.size(); ++i) {
    const TuningStep& s = steps[i];
    os << "  " << i << ": " << s.name << (s.bridge ? " (bridge)" : "") << " [";
    for (size_t k = 0; k < s.extents.size(); ++k) os << (k ? "," : "") << s.extents[k];
    os << "] ";
    if (s.source < 0) {
      os << "full search";
    } else {
      os << "reuses " << s.source;
    }
    os << ", " << s.trials << " trials\n";
  }
  return os.str();
}

ReuseSelection select_reuse(const std::vector<ReuseOperator>& ops, SelectionMethod method,
                            const TrialEstimateParams& params) {
  if (method == SelectionMethod::kTopK) return select_top_k(ops, kTopKPrograms, params);
  const std::vector<ReuseOperator> bridges = method == SelectionMethod::kArborescence
                                                 ? std::vector<ReuseOperator>{}
                                                 : one_hop_bridges(ops);
  const ChoiceGraph g = build_choice_graph(ops, bridges, params);
  const SteinerTree t = solve(g, method);
  std::vector<ReuseOperator> nodes = ops;
  nodes.insert(nodes.end(), bridges.begin(), bridges.end());
  return StepOrder(g, t, nodes).finish();
}

ReuseSelection select_top_k(const std::vector<ReuseOperator>& ops, int k,
                            const TrialEstimateParams& params) {
  TESSERA_CHECK(k >= 1) << "reuse: TopK needs k >= 1";
  const int n = static_cast<int>(ops.size());
  // Representative of each operator's group: the first operator of the kind with the most points.
  // (Scanning j in order makes every member of a group agree on it.)
  std::vector<int> representative(n, -1);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      if (!same_kind(ops[i], ops[j])) continue;
      if (representative[i] < 0 || ops[j].points() > ops[representative[i]].points())
        representative[i] = j;
    }
  }
  ReuseSelection sel;
  sel.step_of_operator.assign(n, -1);
  auto add = [&](int i, int source, double trials) {
    sel.step_of_operator[i] = static_cast<int>(sel.steps.size());
    sel.steps.push_back({ops[i].name, ops[i].extents, false, source, trials, {}});
    sel.total_trials += trials;
    if (source < 0) ++sel.full_searches;
  };
  for (int i = 0; i < n; ++i) {
    if (representative[i] == i) add(i, -1, params.full_search_trials);
  }
  for (int i = 0; i < n; ++i) {
    if (representative[i] != i) add(i, sel.step_of_operator[representative[i]], k);
  }
  return sel;
}

}  // namespace tessera::tune::reuse
