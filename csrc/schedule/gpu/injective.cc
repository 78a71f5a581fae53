#include "schedule/gpu/injective.h"

#include <set>
#include <vector>

#include "ir/functor.h"
#include "schedule/gpu/kernel_frame.h"
#include "schedule/lower_access.h"
#include "util/check.h"

namespace tessera::schedule::gpu {

using ir::Expr;
using ir::Var;
using loop::Stmt;

namespace {

Expr ceil_div(const Expr& n, int64_t d) {
  return ir::floordiv(n + ir::int_imm(d - 1), ir::int_imm(d));
}

// Every compute tensor of the DAG: with all of them inlined, a stage reads kernel inputs only.
std::set<const ir::TensorNode*> all_computes(const StagePlan& plan) {
  std::set<const ir::TensorNode*> s;
  for (const ir::Tensor& t : ir::collect_dag(plan.outputs).computes) s.insert(t.get());
  return s;
}

void check_injective(const Stage& stage) {
  TESSERA_CHECK(stage.op->op->reduce == ir::ReduceKind::kNone)
      << "GPU injective schedule: stage " << stage.op->name << " is a reduction";
  TESSERA_CHECK(!stage.epilogue) << "GPU injective schedule: stage " << stage.op->name
                                 << " has an epilogue";
}

// Axis values of the point at row-major position `flat` of a tensor with shape `shape`.
std::vector<Expr> unflatten(const Expr& flat, const std::vector<Expr>& shape) {
  std::vector<Expr> axes(shape.size());
  Expr rest = flat;
  for (size_t k = shape.size(); k-- > 0;) {
    axes[k] = k == 0 ? rest : ir::floormod(rest, shape[k]);
    rest = ir::floordiv(rest, shape[k]);
  }
  return axes;
}

// out[flat] = the value of output `t` at the point `flat`, for flat < numel(out).
Stmt output_store(const ir::Tensor& t, const Expr& flat, const ir::Buffer& out,
                  const std::set<const ir::TensorNode*>& computes, const AccessLowering& al) {
  TESSERA_CHECK(!t->is_placeholder())
      << "GPU injective schedule: output " << t->name << " is a kernel input";
  const std::vector<Expr> axes = unflatten(flat, t->shape);
  ir::VarMap vm;
  for (size_t a = 0; a < axes.size(); ++a) vm[t->op->axes[a].var.get()] = axes[a];
  const Expr value = al.lower(ir::substitute(inline_body(t, computes), vm));
  // The output is row-major over the op's axes, so its flat index is the thread's position.
  Stmt store = loop::make_store(out, flat, value);
  return loop::make_if(ir::lt(flat, ir::buffer_size(out)), store);
}

}  // namespace

loop::LoweredFunc lower_injective(const StagePlan& plan, const std::string& name) {
  for (const Stage& stage : plan.stages) check_injective(stage);
  loop::LoweredFunc f;
  f.name = name;
  AccessLowering al;
  bind_plan_args(plan, &f, &al);
  const std::set<const ir::TensorNode*> computes = all_computes(plan);

  // One grid for all outputs: enough blocks for the largest. Temporaries the plan materialised
  // (a stage that is no output) are recomputed by their readers instead.
  Expr blocks = ir::int_imm(0);
  for (const ir::Tensor& t : plan.outputs) {
    blocks = ir::max(blocks, ceil_div(ir::buffer_size(al.buffer_of(t.get())), kInjectiveBlockSize));
  }
  const int64_t blocks_hi = blocks->is_const_int() ? blocks->int_value - 1 : ir::kNoUpperBound;
  const Var bx = ir::var("bx", 0, blocks_hi);
  const Var tx = ir::var("tx", 0, kInjectiveBlockSize - 1);
  const Expr flat = bx * ir::int_imm(kInjectiveBlockSize) + tx;

  std::vector<Stmt> stores;
  for (const ir::Tensor& t : plan.outputs) {
    stores.push_back(output_store(t, flat, al.buffer_of(t.get()), computes, al));
  }
  return finish_launch(std::move(f), plan, bx, blocks, tx, kInjectiveBlockSize,
                       loop::make_seq(stores));
}

}  // namespace tessera::schedule::gpu
