#pragma once
// Prepacked inputs. An input whose value is the same on every call (a weight) and that a stage
// packs into panels (StageAnnotation::pack) can be packed once, outside the kernel, instead of
// on every call. The kernel lowered with that input prepacked (lower(..., prepacked)) takes the
// packed copy in the input's own argument position and packs nothing itself; lower_prepack
// gives the kernel that makes the copy. The pair computes exactly what the kernel lowered
// without prepacking computes: both bind the input's reads to the same packed layout.
#include <optional>
#include <string>
#include <vector>

#include "loop/stmt.h"
#include "schedule/annotation.h"
#include "schedule/lower_access.h"
#include "schedule/stage_plan.h"

namespace tessera::schedule {

// Where an input is packed: the stage that packs it and the layout, whose buffer (named
// "<input>_packed", global scope) is the packed copy's argument.
struct PrepackSite {
  int stage = -1;
  PackedLayout layout;
};

// The site of `input` when its shape is constant and exactly one stage reads it and that stage
// packs it (then every read of the input goes through the packed copy); nullopt otherwise.
std::optional<PrepackSite> prepack_site(const StagePlan& plan, const KernelSchedule& schedule,
                                        const ir::Tensor& input);

// The names among `constant_inputs` (names of plan inputs whose values do not change between
// calls) that `schedule` packs and that can be prepacked, in the plan's input order.
std::vector<std::string> prepackable_inputs(const StagePlan& plan, const KernelSchedule& schedule,
                                            const std::vector<std::string>& constant_inputs);

// The kernel writing the packed copy of input `input` (which must be prepackable). ABI: the
// input's buffer, then the packed buffer; no size variables.
loop::LoweredFunc lower_prepack(const StagePlan& plan, const KernelSchedule& schedule,
                                const std::string& input, const std::string& name);

}  // namespace tessera::schedule
