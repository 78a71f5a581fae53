#pragma once
// Roller-style construction over the same ETIR space, the ablation baseline of construct mode:
// greedy, grow-only (tile actions only, no invTile, no setVThread/interleave), one score for every
// decision: data reuse = traffic saved per byte of footprint added, (Q(T) - Q(T')) / (F(T') -
// F(T)), at the current level. When no growth fits the level's capacity (or saves traffic), cache
// moves one level inward; the walk ends at the register level. No randomness.
#include <vector>

#include "tune/gensor/etir.h"
#include "tune/gensor/model.h"

namespace tessera::tune::gensor {

struct RollerResult {
  std::vector<EtirState> path;  // every state of the greedy path, initial first, final last
};

RollerResult roller_construct(const StageSpace& sp, const AnalyticModel& model);

}  // namespace tessera::tune::gensor
