#include "tune/gensor/walk.h"

#include <cmath>
#include <unordered_set>

namespace tessera::tune::gensor {

double anneal_factor(int t) {
  return 3.0 / (1.0 + std::exp(-std::log(5.0) / 10.0 * (static_cast<double>(t) - 10.0)));
}

double keep_probability(double temperature) {
  return 1.0 - 1.0 / (1.0 + std::exp(-0.5 * (-std::log(temperature) - 10.0)));
}

int roulette(const std::vector<double>& weights, double u) {
  double total = 0;
  for (double w : weights) total += w > 0 ? w : 0;
  if (!(total > 0)) return -1;
  const double target = u * total;
  double cum = 0;
  int last_positive = -1;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (!(weights[i] > 0)) continue;
    cum += weights[i];
    last_positive = static_cast<int>(i);
    if (target < cum) return last_positive;
  }
  return last_positive;  // u * total rounded up to the total
}

std::vector<double> transition_probabilities(const StageSpace& sp, const AnalyticModel& model,
                                             const EtirState& s, const std::vector<Action>& actions,
                                             int t, bool interleave) {
  std::vector<double> p(actions.size(), 0.0);
  double total = 0;
  for (size_t i = 0; i < actions.size(); ++i) {
    if (!interleave && actions[i].kind == ActionKind::kSetVThread) continue;
    double b = model.benefit(sp, s, actions[i]);
    if (actions[i].kind == ActionKind::kCache) b *= anneal_factor(t);
    if (!std::isfinite(b) || b < 0) b = 0;
    p[i] = b;
    total += b;
  }
  if (total > 0) {
    for (double& x : p) x /= total;
  }
  return p;
}

WalkResult gensor_walk(const StageSpace& sp, const AnalyticModel& model, const WalkOptions& opts) {
  WalkResult res;
  std::unordered_set<EtirState, EtirStateHash> seen;
  auto visit = [&](const EtirState& s) {
    if (seen.insert(s).second) {
      res.visited.push_back(s);
      return true;
    }
    return false;
  };
  std::mt19937_64 master(opts.seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const double threshold = opts.t0 * std::ldexp(1.0, -opts.iterations);
  for (int chain = 0; chain < std::max(1, opts.chains); ++chain) {
    std::mt19937_64 rng(master());
    EtirState e = initial_state(sp);
    visit(e);
    double temperature = opts.t0;
    for (int t = 0; temperature > threshold; ++t, temperature /= 2) {
      std::vector<Action> actions = enumerate_actions(sp, e);
      std::vector<double> p = transition_probabilities(sp, model, e, actions, t, opts.interleave);
      int pick = roulette(p, unit(rng));
      if (pick < 0) break;  // nothing feasible: the chain has converged
      EtirState next;
      if (!apply_action(sp, e, actions[pick], &next)) break;
      ++res.steps;
      if (unit(rng) < keep_probability(temperature)) res.top_results.push_back(next);
      if (!visit(next)) ++res.revisits;
      e = next;
    }
    res.finals.push_back(e);
  }
  return res;
}

}  // namespace tessera::tune::gensor
