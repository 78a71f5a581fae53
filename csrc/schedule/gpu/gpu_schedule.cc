#include "schedule/gpu/gpu_schedule.h"

#include "schedule/gpu/injective.h"
#include "schedule/gpu/row_reduction.h"
#include "schedule/gpu/tiled_reduction.h"

namespace tessera::schedule::gpu {

PlanChoices gpu_plan_choices() {
  PlanChoices c;
  c.pad = PadPlacement::kInline;
  c.epilogue = EpiloguePlacement::kFused;
  c.hoist_invariants = false;
  return c;
}

std::string gpu_schedule_name(const StagePlan& plan) {
  bool any_reduction = false;
  for (const Stage& s : plan.stages) {
    any_reduction = any_reduction || s.op->op->reduce != ir::ReduceKind::kNone || s.epilogue;
  }
  if (!any_reduction) return "injective";
  if (is_tiled_reduction_plan(plan) && has_operand_reuse(plan)) return "tiled";
  return "row";
}

loop::LoweredFunc lower_gpu(const StagePlan& plan, const std::string& name) {
  const std::string schedule = gpu_schedule_name(plan);
  if (schedule == "injective") return lower_injective(plan, name);
  if (schedule == "tiled") return lower_tiled_reduction(plan, default_tile_config(plan), name);
  return lower_row_reduction(plan, name);
}

loop::LoweredFunc lower_gpu(const std::vector<ir::Tensor>& outputs,
                            const std::vector<ir::Tensor>& inputs, const std::string& name) {
  return lower_gpu(plan_stages(outputs, inputs, gpu_plan_choices()), name);
}

}  // namespace tessera::schedule::gpu
