#include "schedule/stage_plan.h"

#include <map>
#include <optional>

#include "ir/functor.h"
#include "schedule/split_reduction.h"
#include "util/check.h"
#include "util/counters.h"

namespace tessera::schedule {

using ir::Expr;
using ir::ExprKind;
using ir::Tensor;
using ir::TensorNode;

namespace {

class Inliner : public ir::ExprMutator {
 public:
  explicit Inliner(const std::set<const TensorNode*>& inlined) : inlined_(inlined) {}
  Expr mutate(const Expr& e) override {
    Expr m = mutate_children(e);
    if (m->kind != ExprKind::kAccess || !inlined_.count(m->tensor.get())) return m;
    const ir::ComputeOpNode& op = *m->tensor->op;
    ir::VarMap vmap;
    for (size_t i = 0; i < op.axes.size(); ++i) vmap[op.axes[i].var.get()] = m->operands[i];
    // The producer's body may itself read inlined tensors.
    return mutate(ir::substitute(op.body, vmap));
  }

 private:
  const std::set<const TensorNode*>& inlined_;
};

class AccessReplacer : public ir::ExprMutator {
 public:
  AccessReplacer(const TensorNode* target, Expr value)
      : target_(target), value_(std::move(value)) {}
  Expr mutate(const Expr& e) override {
    if (e->kind == ExprKind::kAccess && e->tensor.get() == target_) return value_;
    return mutate_children(e);
  }

 private:
  const TensorNode* target_;
  Expr value_;
};

bool is_reduction(const Tensor& t) { return !t->is_placeholder() && !t->op->reduce_axes.empty(); }

// A copy of an operand made for a reduction to read: padded ("pad": ops' zero padding) or
// regrouped ("relayout": a derived layout eOperator, derive/rules_intra.h).
bool is_operand_copy(const ir::TensorNode& t) {
  return t.op->tag == "pad" || t.op->tag == "relayout";
}

// Does the op's own body call exp, log, tanh, erf, sigmoid or pow (tens of instructions each)?
bool calls_transcendental(const Tensor& t) {
  bool found = false;
  ir::visit_expr(t->op->body, [&](const Expr& e) {
    if (e->kind != ExprKind::kCall) return;
    switch (e->call_op) {
      case ir::CallOp::kExp:
      case ir::CallOp::kLog:
      case ir::CallOp::kTanh:
      case ir::CallOp::kErf:
      case ir::CallOp::kSigmoid:
      case ir::CallOp::kPow:
        found = true;
        break;
      default:
        break;
    }
  });
  return found;
}

// A tensor this many times smaller than a consumer is loop-invariant in it (the consumer reads
// it broadcast): computing it once into a temporary beats recomputing it per point.
constexpr double kMinHoistRatio = 8.0;

// Points of a tensor with a constant shape; 0 when a dim is symbolic.
double constant_points(const Tensor& t) {
  double n = 1;
  for (const Expr& d : t->shape) {
    if (!d->is_const_int()) return 0;
    n *= static_cast<double>(d->int_value);
  }
  return n;
}

using Consumers = std::map<const TensorNode*, std::vector<Tensor>>;

// Does some consumer of `t` have at least `points` points? Consumers that only read (a reshape,
// a permute: their body is one access) are looked through to their own consumers.
bool read_by_a_consumer_of(const Tensor& t, double points, const Consumers& consumers) {
  auto it = consumers.find(t.get());
  if (it == consumers.end()) return false;
  for (const Tensor& c : it->second) {
    if (c->op->body->kind == ExprKind::kAccess ? read_by_a_consumer_of(c, points, consumers)
                                               : constant_points(c) >= points) {
      return true;
    }
  }
  return false;
}

// How many accesses of `t` its consumers' bodies hold (a body read as a tree).
int64_t reads_of(const Tensor& t, const Consumers& consumers) {
  auto it = consumers.find(t.get());
  if (it == consumers.end()) return 0;
  int64_t reads = 0;
  for (const Tensor& c : it->second) {
    ir::visit_expr(c->op->body, [&](const Expr& e) {
      reads += e->kind == ExprKind::kAccess && e->tensor.get() == t.get();
    });
  }
  return reads;
}

// Is `t` arithmetic (more than a read, which inlines into an index) on the kernel's inputs alone
// (no reduction below it: a layer norm's rstd belongs in its row's loop, see row_fusion.h), read
// broadcast by a consumer with kMinHoistRatio times its points? A batch norm's per-channel
// scale rsqrt(var + eps) * gamma is, under the [N, C, H, W] epilogue that applies it: hoisted,
// the epilogue is one multiply-add per point instead of an rsqrt and four loads.
bool loop_invariant_in_a_consumer(const Tensor& t, const Consumers& consumers) {
  if (t->op->body->kind == ExprKind::kAccess) return false;
  const double points = constant_points(t);
  if (points <= 0 || !read_by_a_consumer_of(t, kMinHoistRatio * points, consumers)) return false;
  for (const Tensor& below : ir::collect_dag({t}).computes) {
    if (is_reduction(below)) return false;
  }
  return true;
}

bool same_extent(const Expr& a, const Expr& b) {
  return a.same_as(b) || (a->is_const_int() && b->is_const_int() && a->int_value == b->int_value);
}

// True if every access of `producer` in `consumer`'s body uses exactly the consumer's axes, in
// order, and both have the same shape: then the consumer can be computed point by point right
// where the producer's value is finished.
bool reads_at_identity(const Tensor& consumer, const Expr& consumer_body, const Tensor& producer) {
  const ir::ComputeOpNode& op = *consumer->op;
  if (op.axes.size() != producer->shape.size()) return false;
  for (size_t i = 0; i < op.axes.size(); ++i) {
    if (!same_extent(op.axes[i].extent, producer->shape[i])) return false;
  }
  bool ok = true;
  ir::visit_expr(consumer_body, [&](const Expr& e) {
    if (e->kind != ExprKind::kAccess || e->tensor.get() != producer.get()) return;
    for (size_t i = 0; i < e->operands.size(); ++i) {
      // Over an extent of 1 the iterator is 0, and simplified indices say so.
      const Expr& idx = e->operands[i];
      const bool unit_dim = op.axes[i].extent->is_const_int() &&
                            op.axes[i].extent->int_value == 1 && idx->is_const_int() &&
                            idx->int_value == 0;
      if (!idx.same_as(op.axes[i].var) && !unit_dim) ok = false;
    }
  });
  return ok;
}

bool is_unit(const Expr& extent) { return extent->is_const_int(1); }

// The positions of the dims of `shape` whose extent is not 1.
std::vector<size_t> non_unit_dims(const std::vector<Expr>& shape) {
  std::vector<size_t> dims;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (!is_unit(shape[i])) dims.push_back(i);
  }
  return dims;
}

std::vector<Expr> axis_extents(const ir::ComputeOpNode& op) {
  std::vector<Expr> extents;
  for (const ir::IterVar& a : op.axes) extents.push_back(a.extent);
  return extents;
}

// reads_at_identity up to unit dims: the consumer's non-unit axes, in order, are the producer's
// non-unit dims (same extents), and every access of `producer` indexes its non-unit dims with
// them and its unit dims with 0. An [M, N] matmul read by its [1, M, N] view's bias add is.
bool reads_through_unit_dims(const Tensor& consumer, const Expr& consumer_body,
                             const Tensor& producer) {
  const ir::ComputeOpNode& op = *consumer->op;
  const std::vector<size_t> mine = non_unit_dims(axis_extents(op));
  const std::vector<size_t> theirs = non_unit_dims(producer->shape);
  if (mine.size() != theirs.size()) return false;
  for (size_t k = 0; k < mine.size(); ++k) {
    if (!same_extent(op.axes[mine[k]].extent, producer->shape[theirs[k]])) return false;
  }
  bool ok = true;
  ir::visit_expr(consumer_body, [&](const Expr& e) {
    if (e->kind != ExprKind::kAccess || e->tensor.get() != producer.get()) return;
    size_t k = 0;
    for (size_t d = 0; d < e->operands.size(); ++d) {
      const Expr& idx = e->operands[d];
      if (is_unit(producer->shape[d])) {
        ok = ok && idx->is_const_int(0);
      } else {
        ok = ok && idx.same_as(op.axes[mine[k++]].var);
      }
    }
  });
  return ok;
}

// `e` is floordiv(v, d) (floormod when `mod`) for the variable v and constant d.
bool is_div_of(const Expr& e, const Expr& v, int64_t d, bool mod) {
  return e->kind == (mod ? ExprKind::kFloorMod : ExprKind::kFloorDiv) &&
         e->operands[0].same_as(v) && e->operands[1]->is_const_int(d);
}

}  // namespace

std::optional<AxisGroups> reshape_groups(const Tensor& consumer, const Expr& consumer_body,
                                         const Tensor& producer) {
  const ir::ComputeOpNode& op = *consumer->op;
  std::optional<AxisGroups> groups;
  bool ok = true;
  ir::visit_expr(consumer_body, [&](const Expr& e) {
    if (!ok || e->kind != ExprKind::kAccess || e->tensor.get() != producer.get()) return;
    AxisGroups mine;
    size_t d = 0;
    for (const ir::IterVar& a : op.axes) {
      if (d >= e->operands.size()) break;
      if (e->operands[d].same_as(a.var) && same_extent(a.extent, producer->shape[d])) {
        mine.push_back({static_cast<int>(d++)});
        continue;
      }
      if (d + 1 >= e->operands.size() || !producer->shape[d + 1]->is_const_int() ||
          !producer->shape[d]->is_const_int() || !a.extent->is_const_int()) {
        break;
      }
      const int64_t inner = producer->shape[d + 1]->int_value;
      if (!is_div_of(e->operands[d], a.var, inner, false) ||
          !is_div_of(e->operands[d + 1], a.var, inner, true) ||
          producer->shape[d]->int_value * inner != a.extent->int_value) {
        break;
      }
      mine.push_back({static_cast<int>(d), static_cast<int>(d + 1)});
      d += 2;
    }
    const bool covers = mine.size() == op.axes.size() && d == e->operands.size();
    ok = covers && (!groups || *groups == mine);
    if (ok) groups = mine;
  });
  if (!ok || !groups) return std::nullopt;
  for (const auto& g : *groups) {
    if (g.size() == 2) return groups;
  }
  return std::nullopt;
}

AxisGroups epilogue_axis_map(const Stage& stage) {
  TESSERA_CHECK(stage.epilogue) << "epilogue_axis_map: stage " << stage.op->name
                                << " has no epilogue";
  if (!stage.epilogue_reshape.empty()) return stage.epilogue_reshape;
  const std::vector<Expr> mine = axis_extents(*stage.epilogue->op);
  AxisGroups map(mine.size());
  bool same_shape = mine.size() == stage.op->shape.size();
  for (size_t a = 0; same_shape && a < mine.size(); ++a) {
    same_shape = same_extent(mine[a], stage.op->shape[a]);
  }
  if (same_shape) {  // plan_stages' default rule (a [6, 1] read as [1, 6] is not)
    for (size_t a = 0; a < map.size(); ++a) map[a] = {static_cast<int>(a)};
    return map;
  }
  const std::vector<size_t> e = non_unit_dims(mine), r = non_unit_dims(stage.op->shape);
  TESSERA_CHECK(e.size() == r.size())
      << "epilogue_axis_map: " << stage.epilogue->name << " does not run along " << stage.op->name;
  for (size_t k = 0; k < e.size(); ++k) map[e[k]] = {static_cast<int>(r[k])};
  return map;
}

std::vector<Expr> point_through_axis_map(const AxisGroups& axis_map,
                                         const std::vector<Expr>& op_point,
                                         const std::vector<Expr>& op_extents) {
  std::vector<Expr> point;
  for (const std::vector<int>& group : axis_map) {
    Expr index = ir::int_imm(0);
    for (size_t k = 0; k < group.size(); ++k) {
      const auto a = static_cast<size_t>(group[k]);
      index = k == 0 ? op_point.at(a) : index * op_extents.at(a) + op_point.at(a);
    }
    point.push_back(index);
  }
  return point;
}

std::vector<Expr> written_point(const Stage& stage, const std::vector<Expr>& op_point) {
  if (!stage.epilogue) return op_point;
  return point_through_axis_map(epilogue_axis_map(stage), op_point, axis_extents(*stage.op->op));
}

Expr epilogue_over_op_axes(const Stage& stage, const std::set<const TensorNode*>& inlined,
                           const Expr& value) {
  if (!stage.epilogue) return Expr();
  std::vector<Expr> op_axes;
  for (const ir::IterVar& iv : stage.op->op->axes) op_axes.push_back(iv.var);
  const std::vector<Expr> point = written_point(stage, op_axes);
  ir::VarMap vm;
  const auto& eaxes = stage.epilogue->op->axes;
  for (size_t a = 0; a < eaxes.size(); ++a) vm[eaxes[a].var.get()] = point[a];
  const Expr e = replace_access(inline_body(stage.epilogue, inlined), stage.op.get(), value);
  return ir::substitute(e, vm);
}

Expr inline_expr(const Expr& e, const std::set<const TensorNode*>& inlined) {
  Inliner in(inlined);
  return in.mutate(e);
}

Expr inline_body(const Tensor& t, const std::set<const TensorNode*>& inlined) {
  TESSERA_CHECK(!t->is_placeholder()) << "placeholder " << t->name << " has no body";
  return inline_expr(t->op->body, inlined);
}

Expr replace_access(const Expr& e, const TensorNode* target, const Expr& value) {
  AccessReplacer r(target, value);
  return r.mutate(e);
}

StagePlan plan_stages(const std::vector<Tensor>& requested_outputs,
                      const std::vector<Tensor>& inputs, const PlanChoices& choices) {
  util::bump(util::Counter::kStagePlans);
  StagePlan plan;
  plan.choices = choices;
  plan.inputs = inputs;
  // Long floating-point sums become trees of chunk sums before anything is planned (accuracy).
  const std::vector<Tensor> outputs = split_long_sums(requested_outputs);
  plan.outputs = outputs;
  ir::TensorDAG dag = ir::collect_dag(outputs);
  for (const Tensor& p : dag.placeholders) {
    bool listed = false;
    for (const Tensor& in : inputs) listed |= in.get() == p.get();
    TESSERA_CHECK(listed) << "placeholder " << p->name << " is read but not a kernel input";
  }
  std::set<const TensorNode*> is_output;
  for (const Tensor& t : outputs) {
    TESSERA_CHECK(!t->is_placeholder()) << "output " << t->name << " is a placeholder";
    is_output.insert(t.get());
  }
  // Consumers of every tensor, by DAG order.
  Consumers consumers;
  for (const Tensor& t : dag.computes) {
    for (const Tensor& in : ir::direct_inputs(t)) consumers[in.get()].push_back(t);
  }

  std::set<const TensorNode*> materialised;
  // What each inlined tensor's body grows to once its own inlined producers are substituted.
  std::map<const TensorNode*, ir::TreeSize> inlined_size;
  for (const Tensor& t : dag.computes) {
    const ir::TreeSize size = ir::tree_size(t->op->body, [&](const ir::ExprNode& access) {
      auto it = inlined_size.find(access.tensor.get());
      return it == inlined_size.end() ? ir::TreeSize{} : it->second;
    });
    bool keep = is_output.count(t.get()) || is_reduction(t);
    // Long or branching elementwise chains (x = x * x, thirty times) would inline into
    // expressions too deep or too large to simplify and emit: such a tensor is materialised.
    keep = keep || size.depth > kMaxInlinedDepth || size.nodes > kMaxInlinedNodes;
    // So is a sizable one read more than once: inlined, each read computes it again, and a
    // chain where each step reads the last twice (an exact argument reduction's running
    // fraction) grows exponentially before the bounds above stop it.
    keep = keep || (size.nodes > kMaxRereadInlinedNodes && reads_of(t, consumers) >= 2);
    if (!keep && is_operand_copy(*t)) {
      bool feeds_reduction = false;
      for (const Tensor& c : consumers[t.get()]) feeds_reduction |= is_reduction(c);
      if (feeds_reduction) {
        ++plan.pads_decided;
        keep = choices.pad == PadPlacement::kMaterialize;
      }
    }
    // A transcendental (exp of softmax) read by a reduction and by something else would be
    // computed twice when inlined into both; computed once into a temporary instead (the
    // reduction and the other reader usually share its rows: see row_fusion.h).
    if (!keep && consumers[t.get()].size() >= 2 && calls_transcendental(t)) {
      for (const Tensor& c : consumers[t.get()]) keep |= is_reduction(c);
    }
    keep = keep || (choices.hoist_invariants && loop_invariant_in_a_consumer(t, consumers));
    if (keep) {
      materialised.insert(t.get());
    } else {
      plan.inlined.insert(t.get());
      inlined_size[t.get()] = size;
    }
  }

  // Epilogue fusion (choices.epilogue kFused): reduction R (not an output) with one consumer E
  // that is an output, elementwise, reads R at identity indices (up to unit dims) and has the same
  // dtype. Consumers are counted after inlining, so bias-add + relu chains collapse into one
  // epilogue.
  std::map<const TensorNode*, Expr> inlined_body;
  std::map<const TensorNode*, std::vector<Tensor>> readers;
  for (const Tensor& t : dag.computes) {
    if (!materialised.count(t.get())) continue;
    inlined_body[t.get()] = inline_body(t, plan.inlined);
    std::set<const TensorNode*> seen;
    ir::visit_expr(inlined_body[t.get()], [&](const Expr& e) {
      if (e->kind == ExprKind::kAccess && seen.insert(e->tensor.get()).second) {
        readers[e->tensor.get()].push_back(t);
      }
    });
  }
  std::map<const TensorNode*, Tensor> epilogue_of;
  std::map<const TensorNode*, AxisGroups> reshape_of;  // epilogues read through a reshape
  std::set<const TensorNode*> fused_epilogues;
  for (const Tensor& t : dag.computes) {
    if (!is_reduction(t) || is_output.count(t.get())) continue;
    const auto& cons = readers[t.get()];
    if (cons.size() != 1) continue;
    const Tensor& e = cons[0];
    if (!is_output.count(e.get()) || is_reduction(e) || e->dtype != t->dtype) continue;
    const std::optional<AxisGroups> reshape = reshape_groups(e, inlined_body[e.get()], t);
    const bool pointwise = reads_at_identity(e, inlined_body[e.get()], t) ||
                           reads_through_unit_dims(e, inlined_body[e.get()], t) || reshape;
    if (fused_epilogues.count(e.get()) || !pointwise) continue;
    // The epilogue may read other tensors, but not another reduction.
    bool reads_other_reduction = false;
    ir::visit_expr(inlined_body[e.get()], [&](const Expr& x) {
      if (x->kind == ExprKind::kAccess && x->tensor.get() != t.get() && is_reduction(x->tensor)) {
        reads_other_reduction = true;
      }
    });
    if (reads_other_reduction) continue;
    epilogue_of[t.get()] = e;
    if (reshape) reshape_of[e.get()] = *reshape;
    fused_epilogues.insert(e.get());
  }
  plan.epilogues_decided = static_cast<int>(epilogue_of.size());
  if (choices.epilogue == EpiloguePlacement::kSeparate) epilogue_of.clear();

  // A fused stage runs where its epilogue would have run: after all of the epilogue's inputs.
  std::map<const TensorNode*, Tensor> anchor_of_epilogue;
  for (auto& [anchor, e] : epilogue_of) {
    for (const Tensor& t : dag.computes) {
      if (t.get() == anchor) anchor_of_epilogue[e.get()] = t;
    }
  }
  for (const Tensor& t : dag.computes) {
    if (!materialised.count(t.get()) || epilogue_of.count(t.get())) continue;
    Stage s;
    auto it = anchor_of_epilogue.find(t.get());
    if (it != anchor_of_epilogue.end()) {
      s.op = it->second;
      s.epilogue = t;
      auto r = reshape_of.find(t.get());
      if (r != reshape_of.end()) s.epilogue_reshape = r->second;
    } else {
      s.op = t;
    }
    plan.stages.push_back(s);
    if (!is_output.count(t.get())) plan.temporaries.push_back(t);
  }
  return plan;
}

bool may_plan_differently(const StagePlan& plan, const PlanChoices& choices) {
  return (choices.pad != plan.choices.pad && plan.pads_decided > 0) ||
         (choices.epilogue != plan.choices.epilogue && plan.epilogues_decided > 0);
}

bool same_stages(const StagePlan& a, const StagePlan& b) {
  if (a.stages.size() != b.stages.size() || a.inlined.size() != b.inlined.size()) return false;
  auto name_of = [](const Tensor& t) { return t ? t->name : std::string(); };
  for (size_t i = 0; i < a.stages.size(); ++i) {
    if (name_of(a.stages[i].op) != name_of(b.stages[i].op) ||
        name_of(a.stages[i].epilogue) != name_of(b.stages[i].epilogue))
      return false;
  }
  std::multiset<std::string> inlined_a, inlined_b;
  for (const TensorNode* t : a.inlined) inlined_a.insert(t->name);
  for (const TensorNode* t : b.inlined) inlined_b.insert(t->name);
  return inlined_a == inlined_b;
}

}  // namespace tessera::schedule
