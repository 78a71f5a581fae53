#include "schedule/lower.h"

#include <set>

#include "loop/pipeline.h"
#include "schedule/lower_stage.h"
#include "schedule/prepack.h"
#include "schedule/row_fusion.h"
#include "schedule/skewed_tiling.h"
#include "util/check.h"

namespace tessera::schedule {

using ir::Expr;
using loop::Stmt;

namespace {

ir::Buffer buffer_for_tensor(const ir::Tensor& t, ir::MemScope scope) {
  return ir::make_buffer(t->name, t->dtype, t->shape, scope);
}

// Finds the kernel input called `name` among the tensors the stage reads.
ir::Tensor find_input(const StagePlan& plan, const std::string& name) {
  for (const ir::Tensor& t : plan.inputs) {
    if (t->name == name) return t;
  }
  TESSERA_FAIL() << "schedule packs '" << name << "', which is not a kernel input";
}

// `prepacked`: inputs whose packed copies are kernel arguments, bound in `al` already.
Stmt lower_one_stage(const Stage& stage, const StageAnnotation& ann, const StagePlan& plan,
                     const std::set<std::string>& prepacked, AccessLowering& al) {
  TESSERA_CHECK(ann.op.empty() || ann.op == stage.op->name)
      << "schedule stage for '" << ann.op << "' applied to op '" << stage.op->name << "'";
  // Packed operands: copied once per kernel call into panels (see pack_layout), so the inner
  // loop walks them contiguously; prepacked ones were copied before the call.
  StageBody sb = make_stage_body(stage, plan, al);
  std::vector<Stmt> packs;
  std::vector<ir::Buffer> pack_buffers;
  std::vector<const ir::TensorNode*> packed;
  for (const std::string& name : ann.pack) {
    if (prepacked.count(name)) continue;
    ir::Tensor t = find_input(plan, name);
    PackedLayout layout = pack_layout(sb, ann, t);
    layout.buffer =
        ir::make_buffer(t->name + "_packed", t->dtype,
                        packed_shape(t->shape, layout.panel, layout.dim), ir::MemScope::kHeap);
    packs.push_back(lower_pack(t, layout, al, ann.vector_width, ann.parallel));
    pack_buffers.push_back(layout.buffer);
    al.bind_packed(t.get(), layout);
    packed.push_back(t.get());
  }
  Stmt body;
  switch (ann.sketch) {
    case Sketch::kMultiLevelTiling:
      // A skew the stage does not allow (a tuner's mutation may move the vector axis) leaves
      // plain multi-level tiling, which every such annotation also describes.
      body = ann.skew_axis >= 0 && skewed_tiling_applies(*sb.op, sb.value, sb.dtype, ann)
                 ? lower_skewed_tiling(sb, ann, al)
                 : lower_multi_level_tiling(sb, ann, al);
      break;
    case Sketch::kCrossLaneReduction:
      body = lower_cross_lane_reduction(sb, ann, al);
      break;
  }
  for (const ir::TensorNode* t : packed) al.unbind_packed(t);
  packs.push_back(body);
  Stmt s = loop::make_seq(packs);
  for (auto it = pack_buffers.rbegin(); it != pack_buffers.rend(); ++it) {
    s = loop::make_allocate(*it, s);
  }
  return s;
}

}  // namespace

loop::LoweredFunc lower(const StagePlan& plan, const KernelSchedule& schedule,
                        const std::string& name, const std::vector<std::string>& prepacked) {
  TESSERA_CHECK(schedule.plan == plan.choices)
      << "schedule is for the stage plan with " << schedule.plan.text()
      << ", the plan given was made with " << plan.choices.text();
  TESSERA_CHECK(schedule.stages.size() == plan.stages.size())
      << "schedule has " << schedule.stages.size() << " stages, the kernel needs "
      << plan.stages.size();
  loop::LoweredFunc f;
  f.name = name;
  AccessLowering al;
  const std::set<std::string> prepacked_set(prepacked.begin(), prepacked.end());
  for (const ir::Tensor& t : plan.inputs) {
    if (prepacked_set.count(t->name)) {
      const std::optional<PrepackSite> site = prepack_site(plan, schedule, t);
      TESSERA_CHECK(site) << "input '" << t->name << "' cannot be prepacked: the schedule does "
                          << "not pack it in the one stage that reads it";
      f.args.push_back(site->layout.buffer);
      al.bind_packed(t.get(), site->layout);
      continue;
    }
    f.args.push_back(buffer_for_tensor(t, ir::MemScope::kGlobal));
    al.bind(t.get(), f.args.back());
  }
  for (const ir::Tensor& t : plan.outputs) {
    f.args.push_back(buffer_for_tensor(t, ir::MemScope::kGlobal));
    al.bind(t.get(), f.args.back());
  }
  std::vector<ir::Buffer> temps;
  for (const ir::Tensor& t : plan.temporaries) {
    temps.push_back(buffer_for_tensor(t, ir::MemScope::kHeap));
    al.bind(t.get(), temps.back());
  }
  std::vector<Stmt> lowered;
  for (size_t i = 0; i < plan.stages.size(); ++i) {
    lowered.push_back(lower_one_stage(plan.stages[i], schedule.stages[i], plan, prepacked_set, al));
  }
  // Chains of stages over the same rows (softmax, norms) share one parallel loop.
  std::vector<Stmt> stages;
  for (const std::vector<size_t>& group : row_fusion_groups(plan, schedule)) {
    std::vector<Stmt> loops;
    for (size_t i : group) loops.push_back(as_tile_loop(lowered[i]));
    bool mergeable = group.size() > 1;
    for (const Stmt& l : loops) mergeable = mergeable && l != nullptr;
    if (mergeable) {
      stages.push_back(merge_row_loops(loops));
    } else {
      for (size_t i : group) stages.push_back(lowered[i]);
    }
  }
  Stmt body = loop::make_seq(stages);
  for (auto it = temps.rbegin(); it != temps.rend(); ++it) body = loop::make_allocate(*it, body);
  f.body = body;
  f.size_vars = ir::collect_dag(plan.outputs).size_vars;
  return loop::run_loop_passes(std::move(f));
}

}  // namespace tessera::schedule
