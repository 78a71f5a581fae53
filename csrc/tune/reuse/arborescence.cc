#include "tune/reuse/arborescence.h"

#include "util/check.h"

namespace tessera::tune::reuse {

namespace {

constexpr int kNone = -1;

// Per node, the index of its cheapest usable incoming edge (kNone for the root). False when a
// non-root node has none.
bool cheapest_incoming(int n, int root, const std::vector<WeightedEdge>& edges,
                       std::vector<int>* in) {
  in->assign(n, kNone);
  for (int e = 0; e < static_cast<int>(edges.size()); ++e) {
    const WeightedEdge& x = edges[e];
    if (x.from == x.to || x.to == root) continue;
    int& best = (*in)[x.to];
    if (best == kNone || x.cost < edges[best].cost) best = e;
  }
  for (int v = 0; v < n; ++v) {
    if (v != root && (*in)[v] == kNone) return false;
  }
  return true;
}

// Cycles of the graph "v -> from of its cheapest incoming edge": cycle[v] = the cycle's number or
// kNone. Returns the number of cycles.
int find_cycles(int n, int root, const std::vector<WeightedEdge>& edges, const std::vector<int>& in,
                std::vector<int>* cycle) {
  cycle->assign(n, kNone);
  std::vector<int> walk_of(n, kNone);  // which walk first visited the node
  int cycles = 0;
  for (int start = 0; start < n; ++start) {
    int v = start;
    while (v != root && walk_of[v] == kNone) {
      walk_of[v] = start;
      v = edges[in[v]].from;
    }
    // A walk that runs into a node of its own walk closed a cycle through v.
    if (v == root || walk_of[v] != start || (*cycle)[v] != kNone) continue;
    for (int u = v; (*cycle)[u] == kNone; u = edges[in[u]].from) (*cycle)[u] = cycles;
    ++cycles;
  }
  return cycles;
}

// Chosen edge indices of the min arborescence of (n, root, edges), or nullopt.
std::optional<std::vector<int>> solve(int n, int root, const std::vector<WeightedEdge>& edges) {
  std::vector<int> in;
  if (!cheapest_incoming(n, root, edges, &in)) return std::nullopt;
  std::vector<int> cycle;
  const int cycles = find_cycles(n, root, edges, in, &cycle);
  if (cycles == 0) {
    std::vector<int> chosen;
    for (int v = 0; v < n; ++v) {
      if (v != root) chosen.push_back(in[v]);
    }
    return chosen;
  }
  // Contract: cycle c becomes node c, every other node gets its own number after the cycles.
  std::vector<int> comp(n);
  int next = cycles;
  for (int v = 0; v < n; ++v) comp[v] = cycle[v] != kNone ? cycle[v] : next++;
  std::vector<WeightedEdge> contracted;
  std::vector<int> origin;  // contracted edge -> edge of this level
  for (int e = 0; e < static_cast<int>(edges.size()); ++e) {
    const WeightedEdge& x = edges[e];
    if (comp[x.from] == comp[x.to] || x.to == root) continue;
    // Entering a cycle at x.to replaces the cycle edge into x.to: the cost is what it adds.
    const double saved = cycle[x.to] != kNone ? edges[in[x.to]].cost : 0;
    contracted.push_back({comp[x.from], comp[x.to], x.cost - saved});
    origin.push_back(e);
  }
  std::optional<std::vector<int>> sub = solve(next, comp[root], contracted);
  if (!sub) return std::nullopt;
  std::vector<int> chosen;
  std::vector<int> entry(cycles, kNone);  // the node where the chosen edge enters each cycle
  for (int c : *sub) {
    const int e = origin[c];
    chosen.push_back(e);
    if (cycle[edges[e].to] != kNone) entry[cycle[edges[e].to]] = edges[e].to;
  }
  for (int v = 0; v < n; ++v) {
    if (cycle[v] == kNone) continue;
    TESSERA_CHECK(entry[cycle[v]] != kNone) << "arborescence: a contracted cycle was not entered";
    if (v != entry[cycle[v]]) chosen.push_back(in[v]);
  }
  return chosen;
}

}  // namespace

std::optional<Arborescence> min_arborescence(int num_nodes, int root,
                                             const std::vector<WeightedEdge>& edges,
                                             const std::vector<bool>& include) {
  TESSERA_CHECK(root >= 0 && root < num_nodes) << "arborescence: root " << root << " out of range";
  TESSERA_CHECK(include.empty() || static_cast<int>(include.size()) == num_nodes)
      << "arborescence: include has " << include.size() << " flags for " << num_nodes << " nodes";
  // Renumber the included nodes densely and keep the edges between them.
  std::vector<int> local(num_nodes, kNone), global;
  for (int v = 0; v < num_nodes; ++v) {
    if (v == root || include.empty() || include[v]) {
      local[v] = static_cast<int>(global.size());
      global.push_back(v);
    }
  }
  std::vector<WeightedEdge> kept;
  std::vector<int> kept_origin;
  for (int e = 0; e < static_cast<int>(edges.size()); ++e) {
    const WeightedEdge& x = edges[e];
    TESSERA_CHECK(x.from >= 0 && x.from < num_nodes && x.to >= 0 && x.to < num_nodes)
        << "arborescence: edge " << e << " has an endpoint out of range";
    if (local[x.from] == kNone || local[x.to] == kNone) continue;
    kept.push_back({local[x.from], local[x.to], x.cost});
    kept_origin.push_back(e);
  }
  std::optional<std::vector<int>> chosen =
      solve(static_cast<int>(global.size()), local[root], kept);
  if (!chosen) return std::nullopt;
  Arborescence a;
  a.parent.assign(num_nodes, kNone);
  for (int k : *chosen) {
    const int e = kept_origin[k];
    a.edges.push_back(e);
    a.parent[edges[e].to] = edges[e].from;
    a.cost += edges[e].cost;
  }
  return a;
}

}  // namespace tessera::tune::reuse
