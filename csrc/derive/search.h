#pragma once
// The distance-guided derivation search (EinNet 6.1-6.2): explorative derivation applies every
// intra-expression rule to every state up to a depth; converging derivation then drives each
// explored state towards each target operator, taking only rule applications that reduce the
// expression distance; fingerprints drop states already seen. A state that reaches distance 0
// is post-optimized (reduction-free eOperators folded into their consumers by traversal
// merging while the match holds) and instantiated into operators, eOperators and
// compile-time scopes.
#include <cstddef>
#include <vector>

#include "derive/instantiate.h"
#include "derive/state.h"

namespace tessera::derive {

struct SearchConfig {
  // MaxDepth of the explorative stage. With converging derivation, conv -> matmul +
  // offset-reduce, transposed conv -> matmul + gather and G2BMM -> dense batch matmul and
  // dilated G2BMM -> dilation-1 G2BMM are reached from depth 1; 2 adds the alternatives one more
  // rule opens at a small cost, while the states kept grow about 5x per level beyond. Conv5x5 ->
  // conv3x3 needs 5 (its five opening rules reduce no distance); ask for it when the target kernel
  // pays for it.
  int explorative_depth = 2;
  int converging_depth = 8;  // most rule applications of one converging walk
  bool use_fingerprints = true;
  bool converge = true;  // false: explorative derivation only (matches found on the way)
  std::vector<OperatorKind> targets = {OperatorKind::kMatmul, OperatorKind::kBatchMatmul,
                                       OperatorKind::kConv2d, OperatorKind::kG2bmm};
  size_t max_states = 200000;  // budget on kept states over both stages
  double time_limit_s = 60.0;
};

struct SearchStats {
  size_t generated = 0;   // successor states produced by rule applications
  size_t explored = 0;    // distinct states kept (explorative and converging)
  size_t pruned = 0;      // successors dropped as duplicates by fingerprint
  size_t collisions = 0;  // fingerprint matches that equality rejected
  size_t converged = 0;   // walks that reached distance 0
  double seconds = 0;
  bool budget_hit = false;
  // The explorative stage's distinct states, and the states it would visit without
  // fingerprints: every rule path counted, a state's subtree once per path reaching it at the
  // depth where it was first kept (a lower bound: a duplicate met at another depth adds only
  // itself).
  size_t explorative_kept = 0;
  double explorative_paths = 0;
  double explorative_pruned_share() const {
    return explorative_paths > 0 ? 1.0 - static_cast<double>(explorative_kept) / explorative_paths
                                 : 0.0;
  }
  double pruned_share() const {
    return generated ? static_cast<double>(pruned) / static_cast<double>(generated) : 0.0;
  }
  // Adds another search's counts (Algorithm 1 runs one search per program variant).
  void add(const SearchStats& o);
};

// One derived program: its state, how each scope runs, and the operator it converged to.
struct Derivation {
  State state;
  OperatorKind target = OperatorKind::kMatmul;
  std::vector<ScopeChoice> choices;
};

struct SearchResult {
  std::vector<Derivation> derivations;  // distinct programs, in the order found
  SearchStats stats;
};

// Distance of a state to an operator: the smallest match distance over its scopes that are
// neither compile-time nor memory-bound (DeriveConstants::kNoMatchDistance when none is).
int state_distance(const State& s, OperatorKind target, const DeriveContext& ctx);

SearchResult derive_programs(const State& initial, const DeriveContext& ctx,
                             const SearchConfig& config = {});

// EinNet's Algorithm 1 for one subprogram: the inter-expression rules (expression merging and
// fusion) applied to the program, then the distance-guided search from the program and from
// each of those variants; the derivations of all, without repeats. Stats add up over the
// searches.
SearchResult optimize_program(const State& program, const DeriveContext& ctx,
                              const SearchConfig& config = {});

// Folds reduction-free eOperators into their consumers while the state stays at distance 0
// for `target` (EinNet's fusion of memory-bound operators).
State post_optimize(const State& s, OperatorKind target, const DeriveContext& ctx);

}  // namespace tessera::derive
