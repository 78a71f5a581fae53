// Chu-Liu/Edmonds: hand-made graphs with known optimal arborescences (no cycle, one cycle to
// contract, a cycle inside a contracted cycle), unreachable nodes, node subsets, and random
// graphs against enumeration of every parent assignment.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "tune/reuse/arborescence.h"

namespace tessera::tune::reuse {
namespace {

// Cheapest spanning arborescence by trying every choice of incoming edge per non-root node.
double brute_force_cost(int n, int root, const std::vector<WeightedEdge>& edges) {
  std::vector<std::vector<int>> incoming(n);
  for (int e = 0; e < static_cast<int>(edges.size()); ++e) {
    if (edges[e].from != edges[e].to && edges[e].to != root) incoming[edges[e].to].push_back(e);
  }
  double best = std::numeric_limits<double>::infinity();
  std::vector<int> pick(n, 0), parent(n, -1);
  for (;;) {
    double cost = 0;
    bool ok = true;
    for (int v = 0; v < n && ok; ++v) {
      if (v == root) continue;
      if (incoming[v].empty()) return best;  // unreachable: infinity
      parent[v] = edges[incoming[v][pick[v]]].from;
      cost += edges[incoming[v][pick[v]]].cost;
    }
    // Every node must reach the root in at most n steps (no cycle).
    for (int v = 0; v < n && ok; ++v) {
      int u = v, steps = 0;
      while (u != root && steps <= n) u = parent[u], ++steps;
      ok = u == root;
    }
    if (ok) best = std::min(best, cost);
    int v = 0;
    for (; v < n; ++v) {
      if (v == root) continue;
      if (++pick[v] < static_cast<int>(incoming[v].size())) break;
      pick[v] = 0;
    }
    if (v == n) return best;
  }
}

TEST(ReuseArborescence, WithoutCyclesTakesTheCheapestIncomingEdges) {
  std::vector<WeightedEdge> edges = {{0, 1, 5}, {0, 2, 9}, {1, 2, 3}, {0, 3, 4}, {2, 3, 1}};
  auto a = min_arborescence(4, 0, edges);
  ASSERT_TRUE(a);
  EXPECT_DOUBLE_EQ(a->cost, 9);
  EXPECT_EQ(a->parent, (std::vector<int>{-1, 0, 1, 2}));
  EXPECT_EQ(a->edges.size(), 3u);
}

TEST(ReuseArborescence, ContractsOneCycle) {
  // Cheapest incoming edges 2->1 and 1->2 form a cycle; entering it at 1 adds 5 - 1, at 2 adds
  // 6 - 1: the root enters at 1.
  std::vector<WeightedEdge> edges = {{2, 1, 1}, {1, 2, 1}, {0, 1, 5},
                                     {0, 2, 6}, {2, 3, 2}, {3, 1, 1}};
  auto a = min_arborescence(4, 0, edges);
  ASSERT_TRUE(a);
  EXPECT_DOUBLE_EQ(a->cost, 8);
  EXPECT_EQ(a->parent, (std::vector<int>{-1, 0, 1, 2}));
}

TEST(ReuseArborescence, ContractsACycleThroughAContractedCycle) {
  // {1,2,3} is a cycle of cheapest edges; contracted, it forms a second cycle with 4 (4 -> 1 and
  // 1 -> 4). Best: enter at 2 from the root (10), then 2->1, 1->3, 1->4: 13 (entering through 4
  // costs 10 + 2 + 1 + 1 = 14).
  std::vector<WeightedEdge> edges = {{2, 1, 1},  {3, 2, 1}, {1, 3, 1}, {0, 2, 10},
                                     {0, 4, 10}, {1, 4, 1}, {4, 1, 2}};
  auto a = min_arborescence(5, 0, edges);
  ASSERT_TRUE(a);
  EXPECT_DOUBLE_EQ(a->cost, 13);
  EXPECT_EQ(a->parent, (std::vector<int>{-1, 2, 0, 1, 1}));
  EXPECT_DOUBLE_EQ(brute_force_cost(5, 0, edges), 13);
}

TEST(ReuseArborescence, UnreachableNodesAndSubsets) {
  std::vector<WeightedEdge> edges = {{0, 1, 1}, {2, 3, 1}, {3, 2, 1}};
  EXPECT_FALSE(min_arborescence(4, 0, edges));  // {2, 3} only reach each other
  // Leaving out 2 and 3 leaves the edge 0 -> 1.
  auto a = min_arborescence(4, 0, edges, {true, true, false, false});
  ASSERT_TRUE(a);
  EXPECT_DOUBLE_EQ(a->cost, 1);
  EXPECT_EQ(a->parent, (std::vector<int>{-1, 0, -1, -1}));
  // A left-out node is not a way through: 3 is reachable only via 2.
  std::vector<WeightedEdge> via = {{0, 2, 1}, {2, 3, 1}, {0, 3, 10}, {0, 1, 2}};
  auto b = min_arborescence(4, 0, via, {true, true, false, true});
  ASSERT_TRUE(b);
  EXPECT_DOUBLE_EQ(b->cost, 12);
  EXPECT_EQ(b->parent[3], 0);
}

TEST(ReuseArborescence, MatchesEnumerationOnRandomGraphs) {
  std::mt19937_64 rng(21);
  std::uniform_real_distribution<double> cost(1, 20);
  int compared = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int n = 3 + static_cast<int>(rng() % 4);  // 3..6 nodes
    std::vector<WeightedEdge> edges;
    for (int u = 0; u < n; ++u) {
      for (int v = 1; v < n; ++v) {
        if (u != v && rng() % 3 != 0) edges.push_back({u, v, std::round(cost(rng))});
      }
    }
    const double want = brute_force_cost(n, 0, edges);
    auto got = min_arborescence(n, 0, edges);
    if (std::isinf(want)) {
      EXPECT_FALSE(got) << "trial " << trial;
      continue;
    }
    ASSERT_TRUE(got) << "trial " << trial;
    EXPECT_NEAR(got->cost, want, 1e-9) << "trial " << trial;
    // The result is an arborescence: n - 1 edges and every node reaches the root.
    EXPECT_EQ(got->edges.size(), static_cast<size_t>(n - 1));
    for (int v = 1; v < n; ++v) {
      int u = v, steps = 0;
      while (u != 0 && steps <= n) u = got->parent[u], ++steps;
      EXPECT_EQ(u, 0) << "trial " << trial << " node " << v;
    }
    ++compared;
  }
  EXPECT_GT(compared, 200);  // most random graphs are reachable ones
}

}  // namespace
}  // namespace tessera::tune::reuse
