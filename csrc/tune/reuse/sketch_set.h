#pragma once
// The sketch set of an operator (ETO's K_alpha, Def. 2 condition 1) in Tessera's search space:
// everything search mode's space (tune/search/space.h) decides by rule rather than by number.
//
// Per plan variant (its PlanChoices: pad and epilogue placement) and per stage: whether it
// reduces and how many spatial and reduce axes it has, whether it carries a fused epilogue, the
// sketch the rules chose, whether the cross-lane sketch is legal besides multi-level tiling, the
// vector axis, and which operands may be packed (named by their kernel-input position, so that
// the text does not depend on tensor names). Tile sizes, widths and unroll depths are
// annotations and never appear.
//
// Two operators with the same sketch set text can run each other's sketches: a schedule of one
// is a valid structure for the other, and only its numbers need searching.
#include <string>

#include "schedule/default_schedule.h"
#include "tune/common.h"

namespace tessera::tune::reuse {

// The rules are evaluated on `target` (its lanes decide nothing structural in the rules today,
// but passing one fixed target keeps the condition hardware-independent, as Def. 2 requires).
std::string sketch_set_text(const Task& task);

// The target reuse conditions are evaluated on: schedule::Target's defaults, not the host.
schedule::Target reference_target();

}  // namespace tessera::tune::reuse
