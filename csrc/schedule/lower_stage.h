#pragma once
// Loop nests for one stage, per sketch.
#include "loop/stmt.h"
#include "schedule/annotation.h"
#include "schedule/lower_access.h"
#include "schedule/stage_plan.h"

namespace tessera::schedule {

// What a stage computes, with producers inlined, ready to be placed in loops.
struct StageBody {
  const ir::ComputeOpNode* op = nullptr;
  ir::Expr value;     // per-point value (reductions: the value combined), accesses not lowered
  ir::Expr epilogue;  // expression of `acc_var` (the finished value) and the op's axes, or null
  ir::Var acc_var;    // placeholder variable for the finished reduction value in `epilogue`
  ir::Buffer out;     // buffer written (row-major over the written tensor's dims)
  // Per dim of `out`, the op axes it runs along (epilogue_axis_map: an epilogue through unit
  // dims or a reshape); empty: `out` runs along the op's axes.
  AxisGroups out_axes;
  ir::DType dtype = ir::DType::kFloat32;
};

StageBody make_stage_body(const Stage& stage, const StagePlan& plan, const AccessLowering& al);

// SSRSRS multi-level tiling (and its reduction-free injective form).
loop::Stmt lower_multi_level_tiling(const StageBody& sb, const StageAnnotation& ann,
                                    const AccessLowering& al);

// Per output point, vectorised partial reductions combined across lanes (rfactor).
loop::Stmt lower_cross_lane_reduction(const StageBody& sb, const StageAnnotation& ann,
                                      const AccessLowering& al);

// How `t` is packed for this stage (the layout's buffer left unset): an operand indexed by the
// vector axis gets panels as wide as the vector-axis register tile (vector loads); one indexed
// only by another register-tiled axis (the row operand of a GEMM) gets panels as wide as that
// axis's register tile (the broadcasts of one reduction step become neighbours); otherwise
// panels of the last dim.
PackedLayout pack_layout(const StageBody& sb, const StageAnnotation& ann, const ir::Tensor& t);

// Copies `t` into its packed layout (see PackedLayout), zero-filling past the end; over the panels
// in parallel when the stage runs in parallel.
loop::Stmt lower_pack(const ir::Tensor& t, const PackedLayout& layout, const AccessLowering& al,
                      int vector_width, bool parallel);

}  // namespace tessera::schedule
