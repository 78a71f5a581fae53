#pragma once
// Lowering: compute DAG + schedule -> loop IR kernel.
#include <string>
#include <vector>

#include "ir/tensor.h"
#include "loop/stmt.h"
#include "schedule/annotation.h"
#include "schedule/stage_plan.h"

namespace tessera::schedule {

// Lowers `plan` with one annotation per stage. Kernel ABI: buffers = plan.inputs then
// plan.outputs; size variables = the free symbolic sizes of the DAG in first-use order.
// The loop nests then go through the loop-IR passes (loop/pipeline.h), so the result is what the
// CPU code generator translates. Throws tessera::Error if the schedule does not fit the plan
// (its plan choices are not the plan's, or its stages are not the plan's stages).
// Inputs named in `prepacked` are read already packed (schedule/prepack.h): the kernel takes
// each one's packed copy in the input's argument position; each must be prepackable.
loop::LoweredFunc lower(const StagePlan& plan, const KernelSchedule& schedule,
                        const std::string& name, const std::vector<std::string>& prepacked = {});

}  // namespace tessera::schedule
