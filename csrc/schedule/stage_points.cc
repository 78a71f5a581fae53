#include "schedule/stage_points.h"

#include "ir/functor.h"
#include "util/check.h"

namespace tessera::schedule {

using ir::Expr;
using ir::Var;

Expr ceil_div(const Expr& n, int64_t t) {
  return ir::floordiv(n + ir::int_imm(t - 1), ir::int_imm(t));
}

Expr all_of(const std::vector<Expr>& conds) {
  Expr r = ir::bool_imm(true);
  for (const Expr& c : conds) r = ir::logical_and(r, c);
  return r;
}

Var tile_var(const std::string& name, const Expr& count) {
  int64_t hi = count->is_const_int() ? count->int_value - 1 : ir::kNoUpperBound;
  return ir::var(name, 0, hi);
}

TileGrid make_tile_grid(const ir::ComputeOpNode& op, const std::vector<int64_t>& tile_outer) {
  const size_t n = op.axes.size();
  TileGrid g;
  g.extent.resize(n);
  g.base.resize(n);
  std::vector<Expr> count(n);
  g.total = ir::int_imm(1);
  for (size_t a = 0; a < n; ++a) {
    TESSERA_CHECK(tile_outer[a] >= 1) << "stage " << op.name << ": tiles must be positive";
    g.extent[a] = op.axes[a].extent;
    count[a] = ceil_div(g.extent[a], tile_outer[a]);
    g.total = g.total * count[a];
  }
  g.tile = tile_var("tile", g.total);
  Expr rest = g.tile;
  for (size_t k = n; k-- > 0;) {
    // tile < total, so the outermost axis's index is rest itself: no mod, which the simplifier
    // could not remove from a symbolic count (a mod in every address defeats LLVM's addressing).
    Expr o = k == 0 ? rest : ir::floormod(rest, count[k]);
    rest = ir::floordiv(rest, count[k]);
    g.base[k] = o * ir::int_imm(tile_outer[k]);
  }
  return g;
}

Expr PointWriter::value_of(const Expr& body, const std::vector<Expr>& axes,
                           const std::vector<Expr>& raxes) const {
  ir::VarMap vm;
  for (size_t a = 0; a < axes.size(); ++a) vm[sb_.op->axes[a].var.get()] = axes[a];
  for (size_t r = 0; r < raxes.size(); ++r) vm[sb_.op->reduce_axes[r].var.get()] = raxes[r];
  return al_.lower(ir::substitute(body, vm));
}

Expr PointWriter::finish(const std::vector<Expr>& axes, const Expr& acc) const {
  if (!sb_.epilogue.defined()) return acc;
  ir::VarMap vm;
  for (size_t a = 0; a < axes.size(); ++a) vm[sb_.op->axes[a].var.get()] = axes[a];
  vm[sb_.acc_var.get()] = acc;
  return al_.lower(ir::substitute(sb_.epilogue, vm));
}

Expr PointWriter::out_index(const std::vector<Expr>& axes) const {
  if (sb_.out_axes.empty()) return ir::flat_index(sb_.out, axes);
  std::vector<Expr> extents;
  for (const ir::IterVar& a : sb_.op->axes) extents.push_back(a.extent);
  return ir::flat_index(sb_.out, point_through_axis_map(sb_.out_axes, axes, extents));
}

}  // namespace tessera::schedule
