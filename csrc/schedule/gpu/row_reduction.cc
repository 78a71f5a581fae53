#include "schedule/gpu/row_reduction.h"

#include <algorithm>
#include <map>
#include <set>

#include "ir/functor.h"
#include "ir/linear_form.h"
#include "schedule/gpu/kernel_frame.h"
#include "schedule/lower_access.h"
#include "util/check.h"

namespace tessera::schedule::gpu {

using ir::Expr;
using ir::Var;
using loop::ForKind;
using loop::Stmt;

namespace {

// What an extent with no constant value counts as when sizing the block.
constexpr int64_t kAssumedSymbolicExtent = 1024;

Expr ceil_div(const Expr& n, int64_t d) {
  return ir::floordiv(n + ir::int_imm(d - 1), ir::int_imm(d));
}

Expr product(const std::vector<Expr>& v) {
  Expr p = ir::int_imm(1);
  for (const Expr& e : v) p = p * e;
  return p;
}

std::vector<Expr> unflatten(const Expr& flat, const std::vector<Expr>& extents) {
  std::vector<Expr> coords(extents.size());
  Expr rest = flat;
  for (size_t d = extents.size(); d-- > 0;) {
    coords[d] = d == 0 ? rest : ir::floormod(rest, extents[d]);
    rest = ir::floordiv(rest, extents[d]);
  }
  return coords;
}

bool is_reduction(const Stage& s) { return s.op->op->reduce != ir::ReduceKind::kNone; }

int64_t hint(const Expr& e) { return e->is_const_int() ? e->int_value : kAssumedSymbolicExtent; }

// A read at 0 in a row dim of extent 1 (a keepdim mean read back at [n, c, 0]).
bool unit_row_index(const Expr& index, const Expr& row_extent) {
  return row_extent->is_const_int(1) && index->is_const_int(0);
}

// Is `index` the row's index in a dim of extent `row_extent`: `row_index` itself, or 0 in a unit
// dim?
bool indexes_row(const Expr& index, const Expr& row_index, const Expr& row_extent) {
  return ir::expr_equal(index, row_index) || unit_row_index(index, row_extent);
}

// Replaces reads of row results (tensor -> value at the block's row) in a stage body. Every such
// read must index the row with exactly `row_vars` (the stage's own row variables; 0 in unit
// dims) over a row of extents `rows`.
class RowReads : public ir::ExprMutator {
 public:
  RowReads(const std::map<const ir::TensorNode*, Expr>& values, const std::vector<Expr>& row_vars,
           const std::vector<Expr>& rows)
      : values_(values), row_vars_(row_vars), rows_(rows) {}

  Expr mutate(const Expr& e) override {
    if (e->kind != ir::ExprKind::kAccess) return mutate_children(e);
    auto it = values_.find(e->tensor.get());
    if (it == values_.end()) return mutate_children(e);
    bool same = e->operands.size() == row_vars_.size();
    for (size_t d = 0; same && d < row_vars_.size(); ++d) {
      same = indexes_row(e->operands[d], row_vars_[d], rows_[d]);
    }
    TESSERA_CHECK(same) << "GPU row schedule: " << e->tensor->name
                        << " is read at other indices than the reading point's row";
    return it->second;
  }

 private:
  const std::map<const ir::TensorNode*, Expr>& values_;
  const std::vector<Expr>& row_vars_;
  const std::vector<Expr>& rows_;
};

// row_positions' entry for a unit row dim read at 0 (no axis of the reading stage).
constexpr size_t kUnitRowDim = static_cast<size_t>(-1);

class RowLowering {
 public:
  RowLowering(const StagePlan& plan, const std::string& name) : plan_(plan) {
    f_.name = name;
    bind_plan_args(plan, &f_, &al_);
    for (const ir::Tensor& t : plan.outputs) outputs_.insert(t.get());
    // Elementwise temporaries are recomputed where they are read (their values would otherwise
    // need a per-row buffer).
    inlined_ = plan.inlined;
    for (const Stage& s : plan.stages) {
      if (!is_reduction(s) && !outputs_.count(s.written().get())) inlined_.insert(s.op.get());
    }
    auto first = std::find_if(plan.stages.begin(), plan.stages.end(), is_reduction);
    TESSERA_CHECK(first != plan.stages.end())
        << "GPU row schedule: " << name << " has no reduction";
    rows_ = first->op->shape;
  }

  loop::LoweredFunc lower() {
    threads_ = block_threads();
    row_count_ = product(rows_);
    bx_ = ir::var("bx", 0,
                  row_count_->is_const_int() ? row_count_->int_value - 1 : ir::kNoUpperBound);
    tx_ = ir::var("tx", 0, threads_ - 1);
    row_coord_ = unflatten(bx_, rows_);
    std::vector<Stmt> stages;
    for (const Stage& s : plan_.stages) {
      if (inlined_.count(s.op.get())) continue;
      stages.push_back(is_reduction(s) ? reduction_stage(s) : elementwise_stage(s));
    }
    Stmt body = loop::make_seq(stages);
    for (const ir::Buffer& b : allocations_) body = loop::make_allocate(b, body);
    return finish_launch(std::move(f_), plan_, bx_, row_count_, tx_, threads_, body);
  }

 private:
  // Points one thread walks at most in a stage decide the block: a power of two covering the
  // longest stage, clamped to [kRowMinThreads, kRowBlockThreads].
  int64_t block_threads() const {
    int64_t longest = 1;
    for (const Stage& s : plan_.stages) {
      const ir::ComputeOpNode& op = *s.op->op;
      int64_t n = 1;
      for (const ir::IterVar& r : op.reduce_axes) n *= hint(r.extent);
      if (!is_reduction(s)) {
        for (const ir::IterVar& a : op.axes) n *= hint(a.extent);
        int64_t row = 1;
        for (const Expr& d : rows_) row *= hint(d);
        n /= std::max<int64_t>(1, row);
      }
      longest = std::max(longest, n);
    }
    int64_t t = kRowMinThreads;
    while (t < longest && t < kRowBlockThreads) t *= 2;
    return t;
  }

  // Checks that no stage reads a materialised tensor other than row results (a tensor other
  // threads or blocks write in this launch).
  void check_reads(const Expr& body, const std::string& stage) const {
    ir::visit_expr(body, [&](const Expr& e) {
      if (e->kind != ir::ExprKind::kAccess || e->tensor->is_placeholder()) return;
      TESSERA_CHECK(row_values_.count(e->tensor.get()))
          << "GPU row schedule: stage " << stage << " reads " << e->tensor->name
          << ", which is neither a kernel input nor a row result";
    });
  }

  // The reduction's partials combined by the block; the row's result ends in red[0].
  Stmt reduction_stage(const Stage& s) {
    const ir::ComputeOpNode& op = *s.op->op;
    TESSERA_CHECK(s.op->shape.size() == rows_.size())
        << "GPU row schedule: reductions of different shapes (" << s.op->name << ")";
    std::vector<Expr> axis_vars;
    ir::VarMap vm;
    for (size_t d = 0; d < op.axes.size(); ++d) {
      TESSERA_CHECK(ir::expr_equal(op.axes[d].extent, rows_[d]))
          << "GPU row schedule: reductions of different shapes (" << s.op->name << ")";
      axis_vars.push_back(op.axes[d].var);
      vm[op.axes[d].var.get()] = row_coord_[d];
    }
    Expr body = RowReads(row_values_, axis_vars, rows_).mutate(inline_body(s.op, inlined_));
    check_reads(body, s.op->name);
    std::vector<Expr> extents;
    for (const ir::IterVar& r : op.reduce_axes) extents.push_back(r.extent);
    const Expr count = product(extents);
    const Var e = ir::var(op.name + "_e", 0, ir::kNoUpperBound);
    const Expr k = Expr(e) * ir::int_imm(threads_) + tx_;
    const std::vector<Expr> rc = unflatten(k, extents);
    for (size_t r = 0; r < op.reduce_axes.size(); ++r) vm[op.reduce_axes[r].var.get()] = rc[r];
    const Expr value = al_.lower(ir::substitute(body, vm));

    const ir::DType t = s.op->dtype;
    const ir::Buffer part =
        ir::make_buffer(op.name + "_part", t, {ir::int_imm(1)}, ir::MemScope::kRegister);
    const ir::Buffer red =
        ir::make_buffer(op.name + "_red", t, {ir::int_imm(threads_)}, ir::MemScope::kShared);
    allocations_.push_back(red);
    allocations_.push_back(part);
    const Expr zero = ir::int_imm(0);
    std::vector<Stmt> stmts;
    stmts.push_back(loop::make_store(part, zero, ir::reduce_identity(op.reduce, t)));
    const Stmt combine =
        loop::make_store(part, zero, ir::reduce_combine(op.reduce, ir::load(part, zero), value));
    stmts.push_back(loop::make_for(e, zero, ceil_div(count, threads_), ForKind::kSerial,
                                   loop::make_if(ir::lt(k, count), combine)));
    stmts.push_back(loop::make_store(red, tx_, ir::load(part, zero)));
    stmts.push_back(loop::make_barrier());
    // Tree: at each level the lower half adds the upper half; a barrier closes every level.
    for (int64_t half = threads_ / 2; half >= 1; half /= 2) {
      const Expr other = ir::load(red, Expr(tx_) + ir::int_imm(half));
      stmts.push_back(loop::make_if(
          ir::lt(tx_, ir::int_imm(half)),
          loop::make_store(red, tx_, ir::reduce_combine(op.reduce, ir::load(red, tx_), other))));
      stmts.push_back(loop::make_barrier());
    }
    const Expr result = ir::load(red, zero);
    row_values_[s.op.get()] = result;
    Expr written = result;
    if (s.epilogue) {
      // vm maps the op's axes to the row's coordinates (the epilogue reads no reduce axis).
      written = al_.lower(ir::substitute(epilogue_over_op_axes(s, inlined_, result), vm));
      row_values_[s.epilogue.get()] = written;
    }
    if (outputs_.count(s.written().get())) {
      const ir::Buffer& out = al_.buffer_of(s.written().get());
      stmts.push_back(loop::make_if(ir::eq(tx_, zero), loop::make_store(out, bx_, written)));
    }
    return loop::make_seq(stmts);
  }

  // The row positions of an elementwise stage: where it reads some row result, which must be at
  // distinct axis variables of the stage (or at 0 in a unit row dim: kUnitRowDim).
  std::vector<size_t> row_positions(const Stage& s) const {
    const ir::ComputeOpNode& op = *s.op->op;
    std::vector<size_t> pos;
    ir::visit_expr(inline_body(s.op, inlined_), [&](const Expr& e) {
      if (!pos.empty() || e->kind != ir::ExprKind::kAccess || !row_values_.count(e->tensor.get()))
        return;
      for (size_t d = 0; d < e->operands.size(); ++d) {
        const Expr& index = e->operands[d];
        if (d < rows_.size() && unit_row_index(index, rows_[d])) {
          pos.push_back(kUnitRowDim);
          continue;
        }
        for (size_t a = 0; a < op.axes.size(); ++a) {
          if (index.get() == op.axes[a].var.get()) pos.push_back(a);
        }
      }
      if (pos.size() != e->operands.size()) pos.clear();
    });
    TESSERA_CHECK(!pos.empty() || rows_.empty())
        << "GPU row schedule: stage " << s.op->name << " reads no row result at row indices";
    return pos;
  }

  // Every point of the block's row: out[point] = body.
  Stmt elementwise_stage(const Stage& s) {
    TESSERA_CHECK(outputs_.count(s.written().get()) && !s.epilogue)
        << "GPU row schedule: elementwise stage " << s.op->name << " is not a kernel output";
    const ir::ComputeOpNode& op = *s.op->op;
    const std::vector<size_t> pos = row_positions(s);
    std::vector<Expr> row_vars;
    ir::VarMap vm;
    std::vector<bool> is_row(op.axes.size(), false);
    for (size_t d = 0; d < pos.size(); ++d) {
      if (pos[d] == kUnitRowDim) {  // read at 0: no axis of this stage runs along it
        row_vars.push_back(ir::int_imm(0));
        continue;
      }
      TESSERA_CHECK(ir::expr_equal(op.axes[pos[d]].extent, rows_[d]))
          << "GPU row schedule: stage " << s.op->name << " has rows of another shape";
      row_vars.push_back(op.axes[pos[d]].var);
      vm[op.axes[pos[d]].var.get()] = row_coord_[d];
      is_row[pos[d]] = true;
    }
    std::vector<Expr> inner_extents;
    std::vector<size_t> inner_axes;
    for (size_t a = 0; a < op.axes.size(); ++a) {
      if (is_row[a]) continue;
      inner_axes.push_back(a);
      inner_extents.push_back(op.axes[a].extent);
    }
    const Expr count = product(inner_extents);
    const Var e = ir::var(op.name + "_e", 0, ir::kNoUpperBound);
    const Expr p = Expr(e) * ir::int_imm(threads_) + tx_;
    const std::vector<Expr> ic = unflatten(p, inner_extents);
    for (size_t i = 0; i < inner_axes.size(); ++i) vm[op.axes[inner_axes[i]].var.get()] = ic[i];
    const Expr body = RowReads(row_values_, row_vars, rows_).mutate(inline_body(s.op, inlined_));
    check_reads(body, s.op->name);
    std::vector<Expr> point;
    for (size_t a = 0; a < op.axes.size(); ++a) point.push_back(vm.at(op.axes[a].var.get()));
    const ir::Buffer& out = al_.buffer_of(s.op.get());
    const Stmt store =
        loop::make_store(out, ir::flat_index(out, point), al_.lower(ir::substitute(body, vm)));
    return loop::make_for(e, ir::int_imm(0), ceil_div(count, threads_), ForKind::kSerial,
                          loop::make_if(ir::lt(p, count), store));
  }

  const StagePlan& plan_;
  loop::LoweredFunc f_;
  AccessLowering al_;
  std::set<const ir::TensorNode*> outputs_;
  std::set<const ir::TensorNode*> inlined_;  // the plan's, plus its elementwise temporaries
  std::vector<Expr> rows_;
  int64_t threads_ = 0;
  Expr row_count_;
  Var bx_, tx_;
  std::vector<Expr> row_coord_;
  std::map<const ir::TensorNode*, Expr> row_values_;
  std::vector<ir::Buffer> allocations_;
};

}  // namespace

loop::LoweredFunc lower_row_reduction(const StagePlan& plan, const std::string& name) {
  return RowLowering(plan, name).lower();
}

}  // namespace tessera::schedule::gpu
