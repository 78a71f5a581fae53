#include "derive/search.h"

#include <chrono>

#include "derive/config.h"
#include "derive/fingerprint.h"
#include "derive/rules_inter.h"
#include "derive/rules_intra.h"

namespace tessera::derive {

using ir::Tensor;

int state_distance(const State& s, OperatorKind target, const DeriveContext& ctx) {
  int best = DeriveConstants::kNoMatchDistance;
  for (const Tensor& scope : scopes(s)) {
    if (is_weight_only(scope, ctx) || is_eoperator(scope)) continue;
    best = std::min(best, match_operator(s, scope, target, ctx).distance);
  }
  return best;
}

State post_optimize(const State& s, OperatorKind target, const DeriveContext& ctx) {
  State cur = s;
  for (bool changed = true; changed;) {
    changed = false;
    for (const State& next : traversal_mergings(cur)) {
      if (state_distance(next, target, ctx) == 0) {
        cur = next;
        changed = true;
        break;
      }
    }
  }
  return cur;
}

void SearchStats::add(const SearchStats& o) {
  generated += o.generated;
  explored += o.explored;
  pruned += o.pruned;
  collisions += o.collisions;
  converged += o.converged;
  seconds += o.seconds;
  budget_hit |= o.budget_hit;
  explorative_kept += o.explorative_kept;
  explorative_paths += o.explorative_paths;
}

namespace {

class Search {
 public:
  Search(const DeriveContext& ctx, const SearchConfig& cfg)
      : ctx_(ctx), cfg_(cfg), start_(std::chrono::steady_clock::now()) {}

  SearchResult run(const State& initial) {
    std::vector<State> pool = explore(initial);
    if (cfg_.converge) {
      for (OperatorKind target : cfg_.targets) {
        StateSet seen;  // per target: a walk towards one operator may meet another's states
        for (const State& s : pool) converge(s, target, &seen);
      }
    } else {
      for (const State& s : pool) {
        for (OperatorKind target : cfg_.targets) {
          if (state_distance(s, target, ctx_) == 0) record(s, target);
        }
      }
    }
    result_.stats.seconds = elapsed();
    result_.stats.collisions = explored_.collisions();
    return std::move(result_);
  }

 private:
  double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  bool out_of_budget() {
    if (result_.stats.explored >= cfg_.max_states || elapsed() > cfg_.time_limit_s) {
      result_.stats.budget_hit = true;
      return true;
    }
    return false;
  }

  // Keeps `s` unless a fingerprint-equal state was kept before (or fingerprints are off). A
  // converging walk drops the explorative stage's states too: each starts a walk of its own
  // towards every target, with at least the steps left here.
  bool keep(const State& s, StateSet* seen) {
    ++result_.stats.generated;
    if (cfg_.use_fingerprints) {
      const uint64_t fp = fingerprint(s);
      if (explored_.contains(s, fp) || !seen->insert(s, fp)) {
        ++result_.stats.pruned;
        return false;
      }
    }
    ++result_.stats.explored;
    return true;
  }

  // Breadth-first to the explorative depth; returns every kept state, the initial one first.
  // paths[id] counts the rule paths reaching state `id` (what a search without fingerprints
  // would expand separately).
  std::vector<State> explore(const State& initial) {
    std::vector<State> pool{initial};
    explored_.insert(initial);
    ++result_.stats.explored;
    std::vector<double> paths{1.0};
    std::vector<int> depth_of{0};
    std::vector<std::pair<State, size_t>> level{{initial, 0}};
    result_.stats.explorative_paths = 1;
    for (int depth = 0; depth < cfg_.explorative_depth && !level.empty(); ++depth) {
      std::vector<std::pair<State, size_t>> next;
      for (const auto& [s, id] : level) {
        if (out_of_budget()) break;
        for (State& succ : intra_successors(s)) {
          const double via = paths[id];
          result_.stats.explorative_paths += via;
          ++result_.stats.generated;
          if (!cfg_.use_fingerprints) {
            ++result_.stats.explored;
            paths.push_back(via);
            depth_of.push_back(depth + 1);
            next.push_back({std::move(succ), paths.size() - 1});
            continue;
          }
          auto [added, sid] = explored_.insert_or_find(succ);
          if (!added) {
            ++result_.stats.pruned;
            // Expanded once on behalf of every path reaching it at the same depth. A state
            // first kept at another depth would have a subtree of another height: only the
            // visit itself is counted then.
            if (depth_of[sid] == depth + 1) paths[sid] += via;
            continue;
          }
          ++result_.stats.explored;
          paths.push_back(via);
          depth_of.push_back(depth + 1);
          next.push_back({std::move(succ), sid});
        }
      }
      for (const auto& [s, id] : next) pool.push_back(s);
      level = std::move(next);
    }
    result_.stats.explorative_kept = pool.size();
    return pool;
  }

  // Walks from `s` through rule applications that strictly reduce the distance to `target`.
  void converge(const State& s, OperatorKind target, StateSet* seen) {
    std::vector<std::pair<State, int>> level{{s, state_distance(s, target, ctx_)}};
    if (level[0].second == 0) {
      record(s, target);
      return;
    }
    if (level[0].second >= DeriveConstants::kNoMatchDistance) return;
    for (int step = 0; step < cfg_.converging_depth && !level.empty(); ++step) {
      std::vector<std::pair<State, int>> next;
      for (const auto& [cur, dist] : level) {
        if (out_of_budget()) return;
        for (State& succ : intra_successors(cur)) {
          const int d = state_distance(succ, target, ctx_);
          if (d >= dist || !keep(succ, seen)) continue;
          if (d == 0) {
            record(succ, target);
          } else {
            next.push_back({std::move(succ), d});
          }
        }
      }
      level = std::move(next);
    }
  }

  void record(const State& s, OperatorKind target) {
    ++result_.stats.converged;
    State opt = post_optimize(s, target, ctx_);
    if (!derived_.insert(opt)) return;
    result_.derivations.push_back(Derivation{opt, target, instantiate(opt, ctx_)});
  }

  const DeriveContext& ctx_;
  const SearchConfig& cfg_;
  const std::chrono::steady_clock::time_point start_;
  StateSet explored_;
  StateSet derived_;
  SearchResult result_;
};

}  // namespace

SearchResult derive_programs(const State& initial, const DeriveContext& ctx,
                             const SearchConfig& config) {
  return Search(ctx, config).run(initial);
}

SearchResult optimize_program(const State& program, const DeriveContext& ctx,
                              const SearchConfig& config) {
  std::vector<State> variants{program};
  for (auto* rule : {&expression_mergings, &expression_fusions}) {
    for (State& v : rule(program)) variants.push_back(std::move(v));
  }
  SearchResult all;
  StateSet seen;
  for (const State& v : variants) {
    SearchResult r = derive_programs(v, ctx, config);
    all.stats.add(r.stats);
    for (Derivation& d : r.derivations) {
      if (seen.insert(d.state)) all.derivations.push_back(std::move(d));
    }
  }
  return all;
}

}  // namespace tessera::derive
