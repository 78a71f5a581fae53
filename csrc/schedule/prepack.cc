#include "schedule/prepack.h"

#include <algorithm>

#include "ir/functor.h"
#include "loop/pipeline.h"
#include "schedule/lower_stage.h"
#include "util/check.h"

namespace tessera::schedule {

namespace {

bool reads(const ir::Expr& e, const ir::TensorNode* t) {
  if (!e.defined()) return false;
  bool found = false;
  ir::visit_expr(e, [&](const ir::Expr& x) {
    found = found || (x->kind == ir::ExprKind::kAccess && x->tensor.get() == t);
  });
  return found;
}

// The stage's body with producers inlined (the buffer it writes is a stand-in: only the
// expressions are looked at).
StageBody body_of(const Stage& stage, const StagePlan& plan) {
  AccessLowering al;
  const ir::Tensor& w = stage.written();
  al.bind(w.get(), ir::make_buffer(w->name, w->dtype, w->shape, ir::MemScope::kHeap));
  return make_stage_body(stage, plan, al);
}

const ir::Tensor& input_named(const StagePlan& plan, const std::string& name) {
  for (const ir::Tensor& t : plan.inputs) {
    if (t->name == name) return t;
  }
  TESSERA_FAIL() << "'" << name << "' is not a kernel input";
}

}  // namespace

std::optional<PrepackSite> prepack_site(const StagePlan& plan, const KernelSchedule& schedule,
                                        const ir::Tensor& input) {
  if (schedule.stages.size() != plan.stages.size()) return std::nullopt;
  // A packed copy is made once for one shape: an input with symbolic sizes stays plain.
  for (const ir::Expr& d : input->shape) {
    if (!d->is_const_int()) return std::nullopt;
  }
  std::optional<PrepackSite> site;
  for (size_t s = 0; s < plan.stages.size(); ++s) {
    const StageBody sb = body_of(plan.stages[s], plan);
    if (!reads(sb.value, input.get()) && !reads(sb.epilogue, input.get())) continue;
    const std::vector<std::string>& pack = schedule.stages[s].pack;
    const bool packs = std::find(pack.begin(), pack.end(), input->name) != pack.end();
    // A second reader, or a reader that reads the input as it is, needs the plain buffer.
    if (site || !packs || reads(sb.epilogue, input.get())) return std::nullopt;
    PrepackSite found;
    found.stage = static_cast<int>(s);
    found.layout = pack_layout(sb, schedule.stages[s], input);
    found.layout.buffer = ir::make_buffer(
        input->name + "_packed", input->dtype,
        packed_shape(input->shape, found.layout.panel, found.layout.dim), ir::MemScope::kGlobal);
    site = found;
  }
  return site;
}

std::vector<std::string> prepackable_inputs(const StagePlan& plan, const KernelSchedule& schedule,
                                            const std::vector<std::string>& constant_inputs) {
  std::vector<std::string> out;
  for (const ir::Tensor& t : plan.inputs) {
    const bool constant =
        std::find(constant_inputs.begin(), constant_inputs.end(), t->name) != constant_inputs.end();
    if (constant && prepack_site(plan, schedule, t)) out.push_back(t->name);
  }
  return out;
}

loop::LoweredFunc lower_prepack(const StagePlan& plan, const KernelSchedule& schedule,
                                const std::string& input, const std::string& name) {
  const ir::Tensor& t = input_named(plan, input);
  const std::optional<PrepackSite> site = prepack_site(plan, schedule, t);
  TESSERA_CHECK(site) << "input '" << input << "' cannot be prepacked: the schedule does not "
                      << "pack it in the one stage that reads it";
  const StageAnnotation& ann = schedule.stages[static_cast<size_t>(site->stage)];
  loop::LoweredFunc f;
  f.name = name;
  f.args.push_back(ir::make_buffer(t->name, t->dtype, t->shape, ir::MemScope::kGlobal));
  f.args.push_back(site->layout.buffer);
  AccessLowering al;
  al.bind(t.get(), f.args[0]);
  f.body = lower_pack(t, site->layout, al, ann.vector_width, ann.parallel);
  return loop::run_loop_passes(std::move(f));
}

}  // namespace tessera::schedule
