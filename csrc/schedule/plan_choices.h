#pragma once
// Kernel-wide choices of the stage plan (stage_plan.h) that a schedule carries next to its stage
// annotations: where "pad" ops are computed, and where an elementwise consumer of a reduction is.
// They name no tensors, so a record stays valid for every kernel of its workload. The defaults
// are the planning rules' choices; a schedule with the defaults writes no "plan" key, so its
// JSON is what it was before the choices existed.
#include <string>
#include <vector>

#include "util/json.h"

namespace tessera::schedule {

// Where an injective "pad" op (or a derived "relayout" copy) read by a reduction is computed.
enum class PadPlacement {
  kMaterialize,  // a padded copy in a kernel temporary, written by its own stage (the rules')
  kInline,       // inlined into the reduction: a select around every load of the inner loop
};

// Where an output elementwise consumer of a reduction (bias + relu after a conv) is computed.
enum class EpiloguePlacement {
  kFused,     // at the reduction's register-tile write-back (the rules')
  kSeparate,  // its own injective stage after the reduction, which writes a kernel temporary
};

struct PlanChoices {
  PadPlacement pad = PadPlacement::kMaterialize;
  EpiloguePlacement epilogue = EpiloguePlacement::kFused;
  // Arithmetic on inputs alone that a larger consumer reads broadcast (a batch norm's per-channel
  // scale) gets a stage of its own, computed once: the CPU's rule. A GPU kernel is one stage, so
  // GPU plans inline it (a few flops per point). Not a search choice: all() keeps it on.
  bool hoist_invariants = true;

  bool operator==(const PlanChoices& o) const {
    return pad == o.pad && epilogue == o.epilogue && hoist_invariants == o.hoist_invariants;
  }
  bool operator!=(const PlanChoices& o) const { return !(*this == o); }
  bool is_default() const { return *this == PlanChoices{}; }

  // {"pad": "inline", "epilogue": "separate"} ("hoist": false only when not the default);
  // from_json takes missing keys as the defaults and rejects unknown values. (GPU schedules
  // once wrote "unit_epilogues": true; every plan now fuses epilogues through unit dims, and
  // the key is ignored.)
  util::Json to_json() const;
  static PlanChoices from_json(const util::Json& j);
  // "pad=inline epilogue=fused": for reports and test names.
  std::string text() const;

  // Every combination, the defaults first.
  static std::vector<PlanChoices> all();
};

const char* pad_placement_name(PadPlacement p);
const char* epilogue_placement_name(EpiloguePlacement e);
// Inverses of the names; throw tessera::Error for another name.
PadPlacement pad_placement_from_name(const std::string& name);
EpiloguePlacement epilogue_placement_from_name(const std::string& name);

}  // namespace tessera::schedule
