#pragma once
// The construction walk of Gensor (Alg. 1 and 2 of the paper): a Markov chain over ETIR states
// whose transition probabilities are the normalised action benefits, with simulated annealing.
//
//   T <- T0; e <- initial state
//   while T > threshold:
//     p(a) <- benefit(e, a), times g(t) for cache; normalised; infeasible actions 0
//     a <- roulette(p)             (correct cumulative sampling; the printed Alg. 2 compares each
//                                   p_i with a fresh rand() and is not a roulette)
//     e' <- apply(e, a)
//     with probability 1 - 1 / (1 + exp(-0.5 (-ln T - 10))): top_results.append(e')
//     e <- e'; T <- T / 2; t <- t + 1
// with g(t) = 3 / (1 + exp(-ln(5)/10 (t - 10))) raising the cache action's weight over time.
//
// Tessera runs several independent chains (seeds drawn from one std::mt19937_64) and keeps every
// distinct state visited: construct mode ranks them all with the time model instead of returning
// the last state (DESIGN.md section 6).
#include <cstdint>
#include <random>
#include <vector>

#include "tune/gensor/etir.h"
#include "tune/gensor/model.h"

namespace tessera::tune::gensor {

struct WalkOptions {
  double t0 = 1.0;
  int iterations = 80;  // threshold = t0 / 2^iterations
  int chains = 8;
  bool interleave = true;  // allow setVThread
  uint64_t seed = 0;
};

struct WalkResult {
  std::vector<EtirState> visited;      // distinct states in first-visit order (initial included)
  std::vector<EtirState> top_results;  // Alg. 1's list, all chains
  std::vector<EtirState> finals;       // last state of each chain (what the paper returns)
  int steps = 0;                       // transitions taken
  int revisits = 0;                    // transitions into an already visited state
};

// g(t): annealing factor of the cache action at iteration t.
double anneal_factor(int t);
// Probability that Alg. 1 appends the new state to top_results at temperature T.
double keep_probability(double temperature);
// Index drawn from `weights` (not necessarily normalised) with u in [0, 1): the first i whose
// cumulative weight exceeds u * sum. -1 when every weight is 0.
int roulette(const std::vector<double>& weights, double u);
// Normalised transition probabilities over `actions` at iteration t (sum 1, or all 0 when no
// action is possible).
std::vector<double> transition_probabilities(const StageSpace& sp, const AnalyticModel& model,
                                             const EtirState& s, const std::vector<Action>& actions,
                                             int t, bool interleave);

WalkResult gensor_walk(const StageSpace& sp, const AnalyticModel& model, const WalkOptions& opts);

}  // namespace tessera::tune::gensor
