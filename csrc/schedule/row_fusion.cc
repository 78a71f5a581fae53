#include "schedule/row_fusion.h"

#include <set>

#include "ir/functor.h"
#include "util/check.h"

namespace tessera::schedule {

using ir::Expr;
using ir::ExprKind;

namespace {

bool same_extent(const Expr& a, const Expr& b) {
  if (a.same_as(b)) return true;
  return a->is_const_int() && b->is_const_int() && a->int_value == b->int_value;
}

// Does `reader` (the stage, with inlined producers and its epilogue) read the `producers` in its
// own rows only: the first `rows` indices of every access to one of them are the reader's first
// `rows` axis variables? (The other indices may be anything: a producer's task covers those
// dims whole.)
bool reads_in_own_rows(const Stage& reader, const StagePlan& plan,
                       const std::set<const ir::TensorNode*>& producers, size_t rows) {
  bool ok = true;
  auto check = [&](const Expr& body, const std::vector<ir::IterVar>& axes) {
    ir::visit_expr(body, [&](const Expr& e) {
      if (!ok || e->kind != ExprKind::kAccess || !producers.count(e->tensor.get())) return;
      if (e->operands.size() < rows || axes.size() < rows) {
        ok = false;
        return;
      }
      for (size_t d = 0; d < rows; ++d) {
        if (!e->operands[d].same_as(axes[d].var)) ok = false;
      }
    });
  };
  check(inline_body(reader.op, plan.inlined), reader.op->op->axes);
  if (reader.epilogue) {
    // Over the op's axes: an epilogue through unit dims has other axes of its own.
    check(epilogue_over_op_axes(reader, plan.inlined, ir::float_imm(0.0)), reader.op->op->axes);
  }
  return ok;
}

// May stage `next` join the group whose first stage is `first` (and earlier members `members`)?
bool joins(const StagePlan& plan, const KernelSchedule& ks, const std::vector<size_t>& members,
           size_t next) {
  const size_t first = members.front();
  const StageAnnotation& fa = ks.stages[first];
  const StageAnnotation& na = ks.stages[next];
  if (!fa.pack.empty() || !na.pack.empty() || fa.parallel != na.parallel) return false;
  const auto& rows = plan.stages[first].op->op->axes;
  const auto& axes = plan.stages[next].op->op->axes;
  if (axes.size() < rows.size()) return false;
  if (fa.tile_outer.size() != rows.size() || na.tile_outer.size() != axes.size()) return false;
  for (size_t k = 0; k < rows.size(); ++k) {
    if (!same_extent(rows[k].extent, axes[k].extent)) return false;
    if (fa.tile_outer[k] != na.tile_outer[k]) return false;
  }
  for (size_t k = rows.size(); k < axes.size(); ++k) {
    if (!axes[k].extent->is_const_int() || na.tile_outer[k] < axes[k].extent->int_value) {
      return false;
    }
  }
  // Every earlier member it reads must be read in its own rows.
  std::set<const ir::TensorNode*> written;
  for (size_t m : members) written.insert(plan.stages[m].written().get());
  return reads_in_own_rows(plan.stages[next], plan, written, rows.size());
}

}  // namespace

std::vector<std::vector<size_t>> row_fusion_groups(const StagePlan& plan,
                                                   const KernelSchedule& schedule) {
  TESSERA_CHECK(schedule.stages.size() == plan.stages.size()) << "schedule/plan size mismatch";
  std::vector<std::vector<size_t>> groups;
  for (size_t i = 0; i < plan.stages.size(); ++i) {
    if (!groups.empty() && joins(plan, schedule, groups.back(), i)) {
      groups.back().push_back(i);
    } else {
      groups.push_back({i});
    }
  }
  return groups;
}

loop::Stmt as_tile_loop(const loop::Stmt& s) {
  loop::Stmt x = s;
  while (x && x->kind == loop::StmtKind::kSeq && x->seq.size() == 1) x = x->seq[0];
  if (!x || x->kind != loop::StmtKind::kFor) return nullptr;
  if (x->for_kind != loop::ForKind::kParallel && x->for_kind != loop::ForKind::kSerial) {
    return nullptr;
  }
  return x;
}

loop::Stmt merge_row_loops(const std::vector<loop::Stmt>& loops) {
  TESSERA_CHECK(!loops.empty()) << "nothing to merge";
  const loop::Stmt& head = loops.front();
  std::vector<loop::Stmt> bodies{head->body};
  for (size_t i = 1; i < loops.size(); ++i) {
    // The stage's own tile variable becomes an alias of the shared one.
    bodies.push_back(loop::make_let(loops[i]->var, head->var, loops[i]->body));
  }
  return loop::make_for(head->var, head->min, head->extent, head->for_kind, loop::make_seq(bodies));
}

}  // namespace tessera::schedule
