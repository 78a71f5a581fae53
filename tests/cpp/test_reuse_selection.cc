// ETO's reuse pair selection: the trial estimate of a reuse edge, the optimization-choice graph,
// the Steiner tree over bridge operators (greedy against exact enumeration), the selector on the
// BERT-base batch matmuls, and the Selective Tuning TopK baseline.
#include <gtest/gtest.h>

#include <random>

#include "const_dims.h"
#include "ops/ops.h"
#include "tune/reuse/selector.h"
#include "tune/reuse/steiner.h"
#include "util/check.h"

namespace tessera::tune::reuse {
namespace {

using testing::dims;

ReuseOperator bmm(int64_t b, int64_t m, int64_t n, int64_t k, const std::string& name) {
  ir::Tensor x = ir::placeholder("A", dims({b, m, k}));
  ir::Tensor y = ir::placeholder("B", dims({b, k, n}));
  return describe_operator({ops::batch_matmul(x, y)}, {x, y}, name);
}

std::vector<ReuseOperator> bert() {
  return {bmm(1, 128, 768, 768, "proj"), bmm(12, 128, 128, 64, "qk"), bmm(12, 128, 64, 128, "pv"),
          bmm(1, 128, 3072, 768, "ffn_up"), bmm(1, 128, 768, 3072, "ffn_down")};
}

// A graph given by hand: node 0 the root, `terminals` marks the operators, the rest bridges
// (build_choice_graph puts bridges after the operators, so terminals come first here too).
ChoiceGraph hand_graph(int operators, int bridges, std::vector<WeightedEdge> edges) {
  ChoiceGraph g;
  g.num_operators = operators;
  g.names.push_back("root");
  g.terminal.push_back(false);
  for (int i = 0; i < operators + bridges; ++i) {
    g.names.push_back((i < operators ? "op" : "bridge") + std::to_string(i));
    g.terminal.push_back(i < operators);
  }
  g.edges = std::move(edges);
  return g;
}

TEST(ReuseSelection, DivisorProductsAndValueCounts) {
  EXPECT_EQ(divisor_products({4, 3}), (std::vector<int64_t>{1, 2, 3, 4, 6, 12}));
  EXPECT_EQ(divisor_products({}), (std::vector<int64_t>{1}));
  // Powers of two up to 2^10: one value per doubling.
  const std::vector<int64_t> pow2 = divisor_products({1024});
  EXPECT_DOUBLE_EQ(values_in_range(pow2, 1), 1);
  EXPECT_DOUBLE_EQ(values_in_range(pow2, 4), 3);
  EXPECT_DOUBLE_EQ(values_in_range(pow2, 1e9), 11);  // never more values than exist
}

TEST(ReuseSelection, ReuseTrialsGrowWithTheExtentRatio) {
  ReuseOperator base = bmm(1, 128, 256, 256, "base");
  ReuseOperator twice = bmm(1, 128, 512, 256, "twice");
  ReuseOperator far = bmm(1, 128, 4096, 256, "far");
  ReuseOperator deeper = bmm(1, 128, 512, 4096, "deeper");
  const double near_cost = reuse_trials(twice, base);
  EXPECT_GT(near_cost, 0);
  EXPECT_LT(near_cost, reuse_trials(far, base));
  // A longer reduction widens the task-count range (r1) too.
  EXPECT_LT(reuse_trials(twice, base), reuse_trials(deeper, base));
  // An equal operator needs only the single-value rounds: 1 * (1 + 1 + unroll + pack/width),
  // of which the yield is measured.
  TrialEstimateParams p;
  EXPECT_DOUBLE_EQ(reuse_trials(base, base, p),
                   p.candidate_yield * (2 + p.unroll_alternatives + p.pack_width_alternatives));
  ReuseOperator crossed = bmm(1, 64, 512, 256, "crossed");  // M smaller, N larger
  EXPECT_THROW(reuse_trials(crossed, base), tessera::Error);
}

TEST(ReuseSelection, ChoiceGraphHasRootAndReuseEdges) {
  std::vector<ReuseOperator> ops = bert();
  ChoiceGraph g = build_choice_graph(ops);
  EXPECT_EQ(g.num_nodes(), 6);
  EXPECT_TRUE(g.bridge_nodes().empty());
  int root_edges = 0, reuse_edges = 0;
  for (const WeightedEdge& e : g.edges) {
    if (e.from == ChoiceGraph::kRoot) {
      ++root_edges;
      EXPECT_DOUBLE_EQ(e.cost, TrialEstimateParams{}.full_search_trials);
    } else {
      ++reuse_edges;
      EXPECT_DOUBLE_EQ(e.cost, reuse_trials(ops[e.to - 1], ops[e.from - 1]));
    }
  }
  EXPECT_EQ(root_edges, 5);
  EXPECT_EQ(reuse_edges, 4);
  ChoiceGraph with = build_choice_graph(ops, one_hop_bridges(ops));
  EXPECT_EQ(with.num_nodes(), 9);
  EXPECT_EQ(with.bridge_nodes(), (std::vector<int>{6, 7, 8}));
  EXPECT_EQ(static_cast<int>(with.edges.size()), 8 + 24);
}

TEST(ReuseSelection, SteinerUsesABridgeOnlyWhenItPays) {
  // Operators 1 and 2 cannot reuse each other; bridge 3 serves both cheaply.
  ChoiceGraph g = hand_graph(
      2, 1,
      {{0, 1, 100}, {0, 2, 100}, {0, 3, 100}, {3, 1, 10}, {3, 2, 10}, {1, 3, 10}, {2, 3, 10}});
  for (const SteinerTree& t : {greedy_steiner_tree(g), exact_steiner_tree(g)}) {
    EXPECT_DOUBLE_EQ(t.tree.cost, 120);  // root -> bridge -> both (root -> 1 -> 3 -> 2 too)
    EXPECT_TRUE(t.include[3]);
  }
  EXPECT_DOUBLE_EQ(arborescence_over(g).tree.cost, 200);
  // When the bridge's edges are dear it stays out.
  ChoiceGraph dear = hand_graph(
      2, 1,
      {{0, 1, 100}, {0, 2, 100}, {0, 3, 100}, {3, 1, 60}, {3, 2, 60}, {1, 3, 60}, {2, 3, 60}});
  for (const SteinerTree& t : {greedy_steiner_tree(dear), exact_steiner_tree(dear)}) {
    EXPECT_DOUBLE_EQ(t.tree.cost, 200);
    EXPECT_FALSE(t.include[3]);
  }
}

// Random choice graphs: root edges to everything at full cost, random cheaper edges among
// operators and bridges.
ChoiceGraph random_graph(std::mt19937_64& rng, int operators, int bridges) {
  std::uniform_real_distribution<double> cheap(10, 150);
  std::vector<WeightedEdge> edges;
  const int n = 1 + operators + bridges;
  for (int v = 1; v < n; ++v) edges.push_back({0, v, 200});
  for (int u = 1; u < n; ++u) {
    for (int v = 1; v < n; ++v) {
      // Operators rarely reach each other directly; bridges reach most.
      const bool bridge_edge = u > operators || v > operators;
      if (u != v && rng() % 10 < (bridge_edge ? 5u : 1u))
        edges.push_back({u, v, std::round(cheap(rng))});
    }
  }
  return hand_graph(operators, bridges, std::move(edges));
}

TEST(ReuseSelection, GreedySteinerAgainstExactEnumeration) {
  std::mt19937_64 rng(2022);
  int equal = 0;
  const int graphs = 200;
  for (int i = 0; i < graphs; ++i) {
    ChoiceGraph g =
        random_graph(rng, 3 + static_cast<int>(rng() % 4), 2 + static_cast<int>(rng() % 5));
    const SteinerTree exact = exact_steiner_tree(g);
    const SteinerTree greedy = greedy_steiner_tree(g);
    const double without = arborescence_over(g).tree.cost;
    EXPECT_LE(exact.tree.cost, greedy.tree.cost + 1e-9) << "graph " << i;
    EXPECT_LE(greedy.tree.cost, without + 1e-9) << "graph " << i;
    EXPECT_EQ(exact.evaluations, 1 << g.bridge_nodes().size());
    // Every terminal is spanned and only included nodes have parents.
    for (int v = 1; v < g.num_nodes(); ++v) {
      if (g.terminal[v]) {
        EXPECT_GE(greedy.tree.parent[v], 0);
      }
      if (!greedy.include[v]) {
        EXPECT_EQ(greedy.tree.parent[v], -1);
      }
    }
    if (greedy.tree.cost <= exact.tree.cost + 1e-9) ++equal;
  }
  // The greedy search is a heuristic: it must find the optimum on most small graphs.
  EXPECT_GE(equal, graphs * 9 / 10) << equal << " of " << graphs << " optimal";
  std::cout << "greedy Steiner optimal on " << equal << " of " << graphs << " random graphs\n";
}

TEST(ReuseSelection, ExactRefusesTooManyBridges) {
  std::mt19937_64 rng(1);
  ChoiceGraph g = random_graph(rng, 2, kMaxExactBridges + 1);
  EXPECT_THROW(exact_steiner_tree(g), tessera::Error);
}

// Steps are in a valid order, costs add up, every operator is tuned exactly once.
void check_selection(const ReuseSelection& s, const std::vector<ReuseOperator>& ops,
                     const TrialEstimateParams& params = {}) {
  ASSERT_EQ(s.step_of_operator.size(), ops.size());
  double total = 0;
  int full = 0;
  for (size_t i = 0; i < s.steps.size(); ++i) {
    EXPECT_LT(s.steps[i].source, static_cast<int>(i)) << s.describe();
    total += s.steps[i].trials;
    if (s.steps[i].source < 0) {
      ++full;
      EXPECT_DOUBLE_EQ(s.steps[i].trials, params.full_search_trials);
    }
  }
  EXPECT_DOUBLE_EQ(total, s.total_trials);
  EXPECT_EQ(full, s.full_searches);
  for (size_t i = 0; i < ops.size(); ++i) {
    const TuningStep& step = s.steps[s.step_of_operator[i]];
    EXPECT_EQ(step.name, ops[i].name);
    EXPECT_FALSE(step.bridge);
  }
}

TEST(ReuseSelection, BertWithoutBridgesTunesThreeOperatorsFully) {
  std::vector<ReuseOperator> ops = bert();
  ReuseSelection s = select_reuse(ops, SelectionMethod::kArborescence);
  check_selection(s, ops);
  EXPECT_EQ(s.steps.size(), 5u);
  // The attention products have no reuse pair: full searches. Of proj/ffn_up/ffn_down one is
  // searched and the other two reuse.
  EXPECT_EQ(s.full_searches, 3) << s.describe();
  EXPECT_LT(s.steps[s.step_of_operator[1]].source, 0);
  EXPECT_LT(s.steps[s.step_of_operator[2]].source, 0);
  EXPECT_LT(s.total_trials, 5 * TrialEstimateParams{}.full_search_trials);
}

TEST(ReuseSelection, BertBridgesCutTheSearchCost) {
  std::vector<ReuseOperator> ops = bert();
  // The paper's setting (Fig. 6): a full search is 1000 trials.
  TrialEstimateParams paper;
  paper.full_search_trials = 1000;
  ReuseSelection plain = select_reuse(ops, SelectionMethod::kArborescence, paper);
  ReuseSelection greedy = select_reuse(ops, SelectionMethod::kGreedyBridges, paper);
  ReuseSelection exact = select_reuse(ops, SelectionMethod::kExactBridges, paper);
  check_selection(greedy, ops, paper);
  check_selection(exact, ops, paper);
  EXPECT_LT(exact.total_trials, plain.total_trials) << exact.describe();
  EXPECT_DOUBLE_EQ(greedy.total_trials, exact.total_trials)
      << greedy.describe() << exact.describe();
  // With bridges every batch matmul can be reached by reuse: a single full search.
  EXPECT_EQ(exact.full_searches, 1) << exact.describe();
  // With search mode's own budget bridges still never cost more.
  EXPECT_LE(select_reuse(ops, SelectionMethod::kExactBridges).total_trials,
            select_reuse(ops, SelectionMethod::kArborescence).total_trials);
  std::cout << "BERT without bridges:\n"
            << plain.describe() << "with one-hop bridges:\n"
            << exact.describe();
}

TEST(ReuseSelection, TopKBaselineSearchesOneOperatorPerKind) {
  std::vector<ReuseOperator> ops = bert();
  ir::Tensor x = ir::placeholder("X", dims({32, 48})), w = ir::placeholder("W", dims({16, 48}));
  ops.push_back(describe_operator({ops::dense(x, w)}, {x, w}, "dense"));  // another kind
  ReuseSelection s = select_top_k(ops, 3);
  check_selection(s, ops);
  EXPECT_EQ(s.full_searches, 2);
  // The batch matmuls' representative is the largest one (ffn_up and ffn_down tie at the most
  // points: the first wins); the others cost k trials.
  const int rep = s.step_of_operator[3];
  EXPECT_LT(s.steps[rep].source, 0);
  for (int i : {0, 1, 2, 4}) {
    EXPECT_EQ(s.steps[s.step_of_operator[i]].source, rep);
    EXPECT_DOUBLE_EQ(s.steps[s.step_of_operator[i]].trials, 3);
  }
  EXPECT_DOUBLE_EQ(s.total_trials, 2 * TrialEstimateParams{}.full_search_trials + 4 * 3);
}

TEST(ReuseSelection, MethodsByNameAndTopKThroughSelectReuse) {
  EXPECT_EQ(selection_method_from_name("arborescence"), SelectionMethod::kArborescence);
  EXPECT_EQ(selection_method_from_name("greedy"), SelectionMethod::kGreedyBridges);
  EXPECT_EQ(selection_method_from_name("exact"), SelectionMethod::kExactBridges);
  EXPECT_EQ(selection_method_from_name("topk"), SelectionMethod::kTopK);
  EXPECT_THROW(selection_method_from_name("steiner"), tessera::Error);
  // kTopK is select_top_k with Selective Tuning's K.
  const std::vector<ReuseOperator> ops = bert();
  EXPECT_EQ(select_reuse(ops, SelectionMethod::kTopK).describe(),
            select_top_k(ops, kTopKPrograms).describe());
  EXPECT_NE(select_reuse(ops, SelectionMethod::kTopK).describe(),
            select_reuse(ops, SelectionMethod::kGreedyBridges).describe());
}

}  // namespace
}  // namespace tessera::tune::reuse
