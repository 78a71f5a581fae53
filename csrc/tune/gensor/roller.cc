#include "tune/gensor/roller.h"

namespace tessera::tune::gensor {

RollerResult roller_construct(const StageSpace& sp, const AnalyticModel& model) {
  RollerResult res;
  EtirState s = initial_state(sp);
  res.path.push_back(s);
  // Each step grows one ladder step or moves inward, so the path is bounded by the ladders.
  for (int guard = 0; guard < 10000; ++guard) {
    const int l = s.level;
    const double q0 = model.traffic(sp, s, l), f0 = model.footprint(sp, s, l);
    double best_score = 0;
    EtirState best;
    for (const Action& a : enumerate_actions(sp, s)) {
      if (a.kind != ActionKind::kTile) continue;
      EtirState next;
      if (!apply_action(sp, s, a, &next) || !model.feasible(sp, next)) continue;
      const double saved = q0 - model.traffic(sp, next, l);
      const double added = model.footprint(sp, next, l) - f0;
      const double score = added > 0 ? saved / added : (saved > 0 ? 1e30 : 0);
      if (score > best_score) {
        best_score = score;
        best = next;
      }
    }
    if (best_score > 0) {
      s = best;
    } else if (l < kReg) {
      EtirState next;
      if (!apply_action(sp, s, Action{ActionKind::kCache, -1}, &next) || !model.feasible(sp, next))
        break;
      s = next;
    } else {
      break;
    }
    res.path.push_back(s);
  }
  return res;
}

}  // namespace tessera::tune::gensor
