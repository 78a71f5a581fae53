#include "tune/gensor/etir.h"

#include <algorithm>
#include <sstream>

#include "util/check.h"

namespace tessera::tune::gensor {

namespace {

uint64_t mix(uint64_t h, uint64_t v) {
  // 64-bit FNV-1a over the value's bytes, folded in one step per value.
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h * 0x100000001b3ull;
}

int64_t smallest(const std::vector<int64_t>& ladder) { return ladder.empty() ? 1 : ladder.front(); }

// Index of the ladder value equal to v (or the last one below it).
int ladder_pos(const std::vector<int64_t>& ladder, int64_t v) {
  int pos = 0;
  for (size_t i = 0; i < ladder.size(); ++i) {
    if (ladder[i] <= v) pos = static_cast<int>(i);
  }
  return pos;
}

bool vthread_allowed(const StageSpace& sp, int d) {
  if (sp.cross_lane()) return d == sp.num_iters() - 1 && sp.num_reduce > 0;
  return d < sp.num_spatial;
}

}  // namespace

uint64_t EtirState::hash() const {
  uint64_t h = 1469598103934665603ull;
  h = mix(h, static_cast<uint64_t>(level));
  for (const auto& lv : tile) {
    h = mix(h, lv.size());
    for (int64_t v : lv) h = mix(h, static_cast<uint64_t>(v));
  }
  for (int64_t v : vthread) h = mix(h, static_cast<uint64_t>(v));
  return h;
}

bool EtirState::operator==(const EtirState& o) const {
  if (level != o.level || vthread != o.vthread) return false;
  for (int l = 0; l < kNumLevels; ++l) {
    if (tile[l] != o.tile[l]) return false;
  }
  return true;
}

std::string EtirState::to_string(const StageSpace& sp) const {
  std::ostringstream os;
  os << "level=" << level_name(level);
  for (int l = 0; l < kNumLevels; ++l) {
    os << " " << level_name(l) << "[";
    for (size_t d = 0; d < tile[l].size(); ++d) {
      os << (d ? "," : "") << sp.names[d] << "=" << tile[l][d];
    }
    os << "]";
  }
  os << " vthread[";
  for (size_t d = 0; d < vthread.size(); ++d) os << (d ? "," : "") << vthread[d];
  os << "]";
  return os.str();
}

const char* action_name(ActionKind k) {
  switch (k) {
    case ActionKind::kTile:
      return "tile";
    case ActionKind::kInvTile:
      return "invTile";
    case ActionKind::kCache:
      return "cache";
    case ActionKind::kSetVThread:
      return "setVThread";
  }
  return "?";
}

std::string Action::to_string(const StageSpace& sp) const {
  std::string s = action_name(kind);
  if (iter >= 0) s += "(" + sp.names[iter] + ")";
  return s;
}

EtirState initial_state(const StageSpace& sp) {
  EtirState s;
  s.level = kL2;
  const int d = sp.num_iters();
  for (int l = 0; l < kNumLevels; ++l) {
    s.tile[l].assign(d, 1);
    for (int i = 0; i < d; ++i) s.tile[l][i] = smallest(sp.ladder[l][i]);
  }
  for (int i = sp.num_spatial; i < d; ++i) {
    if (sp.cross_lane()) {
      // The cross-lane sketch reduces the whole range per point.
      for (int l = 0; l < kNumLevels; ++l) s.tile[l][i] = sp.extents[i];
    } else {
      s.tile[kL1][i] = s.tile[kL2][i];
      s.tile[kReg][i] = 1;
    }
  }
  s.vthread.assign(d, 1);
  return s;
}

std::vector<Action> enumerate_actions(const StageSpace& sp, const EtirState& s) {
  std::vector<Action> acts;
  const int d = sp.num_iters();
  for (int i = 0; i < d; ++i) {
    if (sp.ladder[s.level][i].size() > 1) {
      acts.push_back({ActionKind::kTile, i});
      acts.push_back({ActionKind::kInvTile, i});
    }
  }
  if (s.level == kReg) {
    for (int i = 0; i < d; ++i) {
      if (vthread_allowed(sp, i)) acts.push_back({ActionKind::kSetVThread, i});
    }
  }
  if (s.level < kReg) acts.push_back({ActionKind::kCache, -1});
  return acts;
}

int64_t effective_reg_tile(const StageSpace& sp, const EtirState& s, int d) {
  (void)sp;
  return s.tile[kReg][d] * s.vthread[d];
}

bool apply_action(const StageSpace& sp, const EtirState& s, const Action& a, EtirState* out) {
  *out = s;
  const int l = s.level;
  switch (a.kind) {
    case ActionKind::kCache: {
      if (l >= kReg) return false;
      out->level = l + 1;
      const int d = sp.num_iters();
      for (int i = 0; i < d; ++i) {
        out->tile[l + 1][i] = smallest(sp.ladder[l + 1][i]);
        if (sp.is_reduce(i)) {
          // Reduce tiles: inherited by L1 (one split in the sketch); one step per register tile.
          out->tile[l + 1][i] =
              sp.cross_lane() ? sp.extents[i] : (l + 1 == kL1 ? s.tile[kL2][i] : 1);
        }
      }
      return true;
    }
    case ActionKind::kTile:
    case ActionKind::kInvTile: {
      const auto& lad = sp.ladder[l][a.iter];
      if (lad.size() < 2) return false;
      int pos = ladder_pos(lad, s.tile[l][a.iter]);
      pos += a.kind == ActionKind::kTile ? 1 : -1;
      if (pos < 0 || pos >= static_cast<int>(lad.size())) return false;
      const int64_t v = lad[pos];
      // Nesting: an L1 tile lies inside the L2 tile, a register tile (with its interleave)
      // inside the L2 tile (the L1 tile only orders the register-tile loops, see to_annotation).
      if (l == kL1 && v > s.tile[kL2][a.iter]) return false;
      if (l == kReg && v * s.vthread[a.iter] > std::max(s.tile[kL2][a.iter], lad.front())) {
        return false;
      }
      out->tile[l][a.iter] = v;
      if (l == kL2 && sp.is_reduce(a.iter)) out->tile[kL1][a.iter] = v;
      return true;
    }
    case ActionKind::kSetVThread: {
      if (l != kReg || !vthread_allowed(sp, a.iter)) return false;
      const int64_t v = s.vthread[a.iter] * 2;
      if (v > kMaxVThread) return false;
      if (!sp.cross_lane() && s.tile[kReg][a.iter] * v > s.tile[kL2][a.iter]) return false;
      out->vthread[a.iter] = v;
      return true;
    }
  }
  return false;
}

schedule::StageAnnotation to_annotation(const StageSpace& sp, const EtirState& s) {
  schedule::StageAnnotation ann = sp.base;
  const int n = sp.num_spatial, m = sp.num_reduce;
  if (sp.cross_lane()) {
    for (int a = 0; a < n; ++a) {
      ann.tile_outer[a] = std::min(s.tile[kL2][a], sp.extents[a]);
      ann.tile_reg[a] = 1;
    }
    for (int r = 0; r < m; ++r) ann.tile_reduce[r] = sp.extents[n + r];
    ann.vector_width = static_cast<int>(sp.lanes * (m > 0 ? s.vthread[n + m - 1] : 1));
    return ann;
  }
  // Construct mode sizes no mid level (its L1 tile orders the register-tile loops instead), so
  // its schedules are three-level; the analytic model still ranks four-level ones (search mode).
  ann.tile_mid.clear();
  std::vector<double> reach(n, 1);
  for (int a = 0; a < n; ++a) {
    int64_t reg = std::max<int64_t>(1, effective_reg_tile(sp, s, a));
    ann.tile_reg[a] = reg;
    ann.tile_outer[a] = round_up(std::max(s.tile[kL2][a], reg), reg);
    int64_t l1 = std::min(s.tile[kL1][a], ann.tile_outer[a]);
    reach[a] = static_cast<double>(l1) / static_cast<double>(reg);
  }
  for (int r = 0; r < m; ++r) ann.tile_reduce[r] = s.tile[kL2][n + r];
  if (sp.vector_axis >= 0) {
    int vw = vector_width_for(ann.tile_reg[sp.vector_axis], sp.lanes);
    if (vw >= 2) {
      ann.vector_axis = sp.vector_axis;
      ann.vector_width = vw;
    } else {
      ann.vector_axis = -1;
      ann.vector_width = 1;
    }
  }
  if (ann.vector_axis < 0) ann.pack.clear();
  // s1_order: increasing L1 reach outermost -> innermost; ties keep the rules' order.
  std::vector<int> base_order = sp.base.s1_order;
  if (static_cast<int>(base_order.size()) != n) {
    base_order.clear();
    for (int a = 0; a < n; ++a) base_order.push_back(a);
  }
  std::vector<int> pos(n);
  for (int k = 0; k < n; ++k) pos[base_order[k]] = k;
  std::vector<int> order = base_order;
  std::stable_sort(order.begin(), order.end(), [&](int x, int y) {
    if (reach[x] != reach[y]) return reach[x] < reach[y];
    return pos[x] < pos[y];
  });
  ann.s1_order = order;
  schedule::unroll_inner_reduce(ann);
  return ann;
}

}  // namespace tessera::tune::gensor
