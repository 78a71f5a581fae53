#pragma once
// The GPU schedule of a kernel, picked by the form of its stage plan: injective plans one thread
// per output point (injective.h), a single reduction whose operands are shared between threads
// the tiled SSSRRSRS schedule (tiled_reduction.h), other reductions one block per row
// (row_reduction.h).
#include <string>
#include <vector>

#include "ir/tensor.h"
#include "loop/stmt.h"
#include "schedule/stage_plan.h"

namespace tessera::schedule::gpu {

// The plan choices GPU kernels are planned with: pad ops inlined (a select in the cooperative
// fetch rather than a materialised copy, which would need its own launch) and epilogues fused.
PlanChoices gpu_plan_choices();

// Which schedule gpu_schedule_name / lower_gpu pick: "injective", "tiled" or "row".
std::string gpu_schedule_name(const StagePlan& plan);

// Lowers the plan with the schedule gpu_schedule_name picks, in its default configuration.
// Throws tessera::Error when that schedule does not take the plan.
loop::LoweredFunc lower_gpu(const StagePlan& plan, const std::string& name);

// plan_stages(outputs, inputs, gpu_plan_choices()) then lower_gpu.
loop::LoweredFunc lower_gpu(const std::vector<ir::Tensor>& outputs,
                            const std::vector<ir::Tensor>& inputs, const std::string& name);

}  // namespace tessera::schedule::gpu
