#include "tune/gensor/gpu_construct.h"

#include <algorithm>
#include <map>
#include <random>

#include "tune/gensor/walk.h"
#include "util/check.h"

namespace tessera::tune::gensor {

namespace {

using schedule::gpu::GpuTileConfig;

// Threads per axis at the shared level (gpu_state_config).
constexpr int64_t kShareLevelThreads = 16;

enum class GpuActionKind { kTile, kInvTile, kCache, kSetVThread };

struct GpuAction {
  GpuActionKind kind = GpuActionKind::kCache;
  bool reduce = false;  // tile / invTile of a reduce axis (shared level only)
  size_t axis = 0;
};

int64_t pow2_ceil(int64_t v) {
  int64_t p = 1;
  while (p < v) p *= 2;
  return p;
}

// Reduce-step ladder: powers of two below the extent, then the extent itself.
int64_t next_step(int64_t v, int64_t extent) { return v >= extent ? 0 : std::min(2 * v, extent); }
int64_t prev_step(int64_t v) {
  if (v <= 1) return 0;
  int64_t p = 1;
  while (p * 2 < v) p *= 2;
  return p;  // the largest power of two below v
}

// Threads along each axis while the walk is at the shared level: up to kShareLevelThreads on
// the two innermost axes longer than one, one elsewhere (the default's layout). The register
// tile is what remains of the block tile; the cache action starts the register level there.
std::vector<int64_t> shared_level_reg(const GpuTileSpace& sp, const GpuEtirState& s) {
  std::vector<int64_t> reg = s.block;
  int threaded = 0;
  for (size_t a = sp.extents.size(); a-- > 0 && threaded < 2;) {
    if (sp.extents[a] <= 1) continue;
    reg[a] = std::max<int64_t>(1, s.block[a] / kShareLevelThreads);
    ++threaded;
  }
  return reg;
}

// The state after `a`, or false when `a` leads off its ladder or breaks block >= reg >= vthread.
bool apply(const GpuTileSpace& sp, const GpuEtirState& s, const GpuAction& a, GpuEtirState* out) {
  *out = s;
  const size_t d = a.axis;
  switch (a.kind) {
    case GpuActionKind::kCache:
      if (s.level != 0) return false;
      out->level = 1;
      out->reg = shared_level_reg(sp, s);
      return true;
    case GpuActionKind::kSetVThread:
      if (s.level != 1 || s.vthread[d] * 2 > s.reg[d]) return false;
      out->vthread[d] *= 2;
      return true;
    case GpuActionKind::kTile:
      if (a.reduce) {
        out->step[d] = next_step(s.step[d], sp.reduce_extents[d]);
        return out->step[d] > 0;
      }
      if (s.level == 0) {
        if (s.block[d] >= pow2_ceil(sp.extents[d])) return false;
        out->block[d] *= 2;
      } else {
        if (s.reg[d] * 2 > s.block[d]) return false;
        out->reg[d] *= 2;
      }
      return true;
    case GpuActionKind::kInvTile:
      if (a.reduce) {
        out->step[d] = prev_step(s.step[d]);
        return out->step[d] > 0;
      }
      if (s.level == 0) {
        if (s.block[d] / 2 < s.reg[d] || s.block[d] == 1) return false;
        out->block[d] /= 2;
      } else {
        if (s.reg[d] / 2 < s.vthread[d] || s.reg[d] == 1) return false;
        out->reg[d] /= 2;
      }
      return true;
  }
  return false;
}

std::vector<GpuAction> enumerate(const GpuTileSpace& sp, const GpuEtirState& s, bool interleave) {
  std::vector<GpuAction> actions;
  for (size_t d = 0; d < sp.extents.size(); ++d) {
    actions.push_back({GpuActionKind::kTile, false, d});
    actions.push_back({GpuActionKind::kInvTile, false, d});
    if (s.level == 1 && interleave) actions.push_back({GpuActionKind::kSetVThread, false, d});
  }
  if (s.level == 0) {
    for (size_t r = 0; r < sp.reduce_extents.size(); ++r) {
      actions.push_back({GpuActionKind::kTile, true, r});
      actions.push_back({GpuActionKind::kInvTile, true, r});
    }
    actions.push_back({GpuActionKind::kCache, false, 0});
  }
  return actions;
}

// Predictions by configuration text (many states share a configuration).
class PredictionCache {
 public:
  PredictionCache(const GpuTileSpace& sp, const cost::GpuHardware& hw) : sp_(sp), hw_(hw) {}
  const GpuPrediction& operator()(const GpuTileConfig& c) {
    auto [it, fresh] = cache_.try_emplace(c.text());
    if (fresh) it->second = predict_gpu_tiles(sp_, c, hw_);
    return it->second;
  }

 private:
  const GpuTileSpace& sp_;
  const cost::GpuHardware& hw_;
  std::map<std::string, GpuPrediction> cache_;
};

}  // namespace

bool GpuEtirState::operator==(const GpuEtirState& o) const {
  return level == o.level && block == o.block && reg == o.reg && vthread == o.vthread &&
         step == o.step;
}

GpuTileConfig gpu_state_config(const GpuTileSpace& sp, const GpuEtirState& s) {
  const std::vector<int64_t> reg = s.level == 0 ? shared_level_reg(sp, s) : s.reg;
  const std::vector<int64_t>& block = s.block;
  const std::vector<int64_t>& vthread = s.vthread;
  const std::vector<int64_t>& step = s.step;
  GpuTileConfig c;
  for (size_t a = 0; a < block.size(); ++a) {
    c.thread.push_back(block[a] / reg[a]);
    c.vthread.push_back(vthread[a]);
    c.inner.push_back(reg[a] / vthread[a]);
  }
  c.stage = step;
  c.unroll.assign(step.size(), 1);
  // Unroll the innermost reduce axis's step (up to 4 values, a divisor of the step).
  if (!step.empty()) {
    for (int64_t u = std::min<int64_t>(4, step.back()); u >= 1; --u) {
      if (step.back() % u == 0) {
        c.unroll.back() = u;
        break;
      }
    }
  }
  return c;
}

GpuEtirState initial_gpu_state(const GpuTileSpace& sp) {
  GpuEtirState s;
  s.block.assign(sp.extents.size(), 1);
  s.reg.assign(sp.extents.size(), 1);
  s.vthread.assign(sp.extents.size(), 1);
  s.step.assign(sp.reduce_extents.size(), 1);
  return s;
}

GpuEtirState warm_gpu_state(const GpuTileSpace& sp) {
  const GpuTileConfig d = schedule::gpu::default_tile_config(*sp.plan);
  GpuEtirState s = initial_gpu_state(sp);
  for (size_t a = 0; a < s.block.size(); ++a) {
    s.block[a] = pow2_ceil(d.vthread[a] * d.thread[a] * d.inner[a]);
  }
  s.step = d.stage;
  return s;
}

GpuConstructResult construct_gpu(const schedule::StagePlan& plan, const cost::GpuHardware& hw,
                                 const GpuConstructOptions& options) {
  const GpuTileSpace sp = make_gpu_tile_space(plan);
  PredictionCache predict(sp, hw);
  std::vector<GpuEtirState> visited;
  auto visit = [&](const GpuEtirState& s) {
    if (std::find(visited.begin(), visited.end(), s) == visited.end()) visited.push_back(s);
  };
  GpuConstructResult result;
  std::mt19937_64 master(options.seed);
  for (int chain = 0; chain < options.chains; ++chain) {
    std::mt19937_64 rng(master());
    std::uniform_real_distribution<double> uniform(0.0, 1.0);
    GpuEtirState s =
        options.warm_start && chain % 2 == 1 ? warm_gpu_state(sp) : initial_gpu_state(sp);
    visit(s);
    for (int t = 0; t < options.iterations; ++t) {
      const GpuPrediction here = predict(gpu_state_config(sp, s));
      const std::vector<GpuAction> actions = enumerate(sp, s, options.interleave);
      std::vector<GpuEtirState> next(actions.size());
      std::vector<double> weights(actions.size(), 0.0);
      for (size_t i = 0; i < actions.size(); ++i) {
        if (!apply(sp, s, actions[i], &next[i])) continue;
        if (actions[i].kind == GpuActionKind::kCache) {
          weights[i] = anneal_factor(t);  // same configuration: benefit 1, annealed
          continue;
        }
        const GpuPrediction& there = predict(gpu_state_config(sp, next[i]));
        if (!there.feasible) continue;
        weights[i] = here.feasible ? here.time_s / there.time_s : 1.0;
      }
      const int pick = roulette(weights, uniform(rng));
      if (pick < 0) break;
      s = next[static_cast<size_t>(pick)];
      visit(s);
      ++result.steps;
    }
  }
  result.states_visited = static_cast<int>(visited.size());

  // Rank the distinct feasible configurations, the rules' default among them (as on CPU: the
  // walk then never ends worse than the untuned schedule, by the model's account).
  std::vector<GpuTileConfig> configs;
  for (const GpuEtirState& s : visited) configs.push_back(gpu_state_config(sp, s));
  configs.push_back(schedule::gpu::default_tile_config(plan));
  std::vector<std::pair<double, GpuTileConfig>> ranked;
  std::map<std::string, bool> seen;
  for (const GpuTileConfig& c : configs) {
    if (!seen.emplace(c.text(), true).second) continue;
    const GpuPrediction& p = predict(c);
    if (p.feasible) ranked.emplace_back(p.time_s, c);
  }
  TESSERA_CHECK(!ranked.empty()) << "GPU Gensor: no feasible state visited";
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  result.config = ranked[0].second;
  result.prediction = predict(result.config);
  for (size_t i = 0; i < ranked.size() && static_cast<int>(i) < options.top_k; ++i) {
    result.top.push_back(ranked[i].second);
    result.top_predicted_ms.push_back(ranked[i].first * 1e3);
  }
  return result;
}

}  // namespace tessera::tune::gensor
