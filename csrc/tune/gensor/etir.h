#pragma once
// ETIR (Gensor's enhanced tensor IR) on the CPU: the state of the construction graph and the
// actions (edges) between states.
//
// State: a tile size per iterator per memory level (L2 = one core's parallel task, L1, registers),
// the current scheduling level, and a virtual-thread (interleave) factor per iterator. Actions:
//   tile(d) / invTile(d)  grow / shrink the tile of iterator d at the current level by one ladder
//                         step (invTile makes revisits normal: states are hashed and deduplicated)
//   cache                 move the current level one step inward (irreversible); the new level
//                         starts from its smallest tiles
//   setVThread(d)         at the register level, double the interleave factor of iterator d
// The GPU vThread splits a tile over threads to avoid bank conflicts; its CPU counterpart is the
// number of independent accumulator chains: a register tile interleaves tile x vthread rows (or
// vectors), enough chains to cover FMA latency x FMA ports (about 8 on current x86 cores).
#include <cstdint>
#include <string>
#include <vector>

#include "schedule/annotation.h"
#include "tune/gensor/stage_space.h"

namespace tessera::tune::gensor {

struct EtirState {
  int level = kL2;
  std::vector<int64_t> tile[kNumLevels];  // [level][iterator]
  std::vector<int64_t> vthread;           // per iterator; 1 = no interleave

  uint64_t hash() const;
  bool operator==(const EtirState& o) const;
  bool operator!=(const EtirState& o) const { return !(*this == o); }
  std::string to_string(const StageSpace& sp) const;
};

struct EtirStateHash {
  size_t operator()(const EtirState& s) const { return static_cast<size_t>(s.hash()); }
};

enum class ActionKind { kTile, kInvTile, kCache, kSetVThread };
const char* action_name(ActionKind k);

struct Action {
  ActionKind kind = ActionKind::kCache;
  int iter = -1;  // -1 for cache
  std::string to_string(const StageSpace& sp) const;
};

inline constexpr int64_t kMaxVThread = 8;

// The unscheduled state: at L2, every tile at its smallest ladder value, no interleave. Levels
// not yet reached hold their smallest values too (reduce tiles of inner levels inherit L2's).
EtirState initial_state(const StageSpace& sp);

// Every action defined at `s` (one per kind and iterator the current level tiles, plus cache
// below the register level). Whether the resulting state fits the hardware is the model's call.
std::vector<Action> enumerate_actions(const StageSpace& sp, const EtirState& s);

// The state after `a`, or false when `a` leads nowhere (ladder end, nesting violated).
bool apply_action(const StageSpace& sp, const EtirState& s, const Action& a, EtirState* out);

// Effective register tile of spatial iterator d: register tile times interleave.
int64_t effective_reg_tile(const StageSpace& sp, const EtirState& s, int d);

// ETIR -> schedule annotation:
//   L2 spatial tiles   -> tile_outer (one parallel task; rounded up to a multiple of tile_reg)
//   register tiles     -> tile_reg (x vthread); vector width = largest power of two <= lanes
//                         dividing the vector-axis register tile
//   L2/L1 reduce tiles -> tile_reduce (R0 step; the sketch splits a reduction only once)
//   L1 spatial tiles   -> s1_order: the sketch has no third spatial tile level, so the L1 tile is
//                         folded into the order of the register-tile loops inside a task: the
//                         axis whose L1 tile spans the most register tiles runs innermost (its
//                         sweep is what L1 holds), the others outside in decreasing L1 reach.
//   cross-lane stages  -> tile_outer = L2 points per task, vector_width = lanes x vthread of the
//                         last reduce iterator (independent partial-sum registers)
schedule::StageAnnotation to_annotation(const StageSpace& sp, const EtirState& s);

}  // namespace tessera::tune::gensor
