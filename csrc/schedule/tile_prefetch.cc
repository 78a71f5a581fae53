#include "schedule/tile_prefetch.h"

#include <unordered_set>

#include "ir/functor.h"
#include "ir/simplify.h"

namespace tessera::schedule {

using ir::Expr;
using ir::int_imm;
using loop::Stmt;

namespace {

// The first load of each buffer in `value`: the others differ only in register coordinates,
// which the hint replaces anyway.
std::vector<Expr> first_load_per_buffer(const Expr& value) {
  std::vector<Expr> loads;
  std::unordered_set<const ir::BufferNode*> seen;
  ir::visit_expr(value, [&](const Expr& e) {
    if (e->kind == ir::ExprKind::kLoad && seen.insert(e->buffer.get()).second) loads.push_back(e);
  });
  return loads;
}

// Every register coordinate (rows x vectors, first lane) substituted into `index` on top of `vm`,
// one index per cache line: elements closer than a line to one already kept are dropped.
std::vector<Expr> tile_lines(const Expr& index, const TileLoops& loops, const ir::VarMap& vm,
                             int64_t line_elems) {
  std::vector<ir::VarMap> coords(1, vm);
  auto expand = [&](const ir::Var& v, int64_t trips) {
    std::vector<ir::VarMap> next;
    for (const ir::VarMap& c : coords) {
      for (int64_t x = 0; x < trips; ++x) {
        ir::VarMap d = c;
        d[v.get()] = int_imm(x);
        next.push_back(std::move(d));
      }
    }
    coords = std::move(next);
  };
  for (size_t r = 0; r < loops.rows.size(); ++r) expand(loops.rows[r], loops.row_trips[r]);
  if (loops.vector_unroll.defined()) expand(loops.vector_unroll, loops.vector_unrolls);
  if (loops.lane.defined()) expand(loops.lane, 1);
  std::vector<Expr> kept;
  for (const ir::VarMap& c : coords) {
    Expr e = ir::simplify(ir::substitute(index, c));
    bool near = false;
    for (const Expr& k : kept) {
      Expr d = ir::simplify(e - k);
      near = near || (d->is_const_int() && std::abs(d->int_value) < line_elems);
    }
    if (!near) kept.push_back(e);
  }
  return kept;
}

}  // namespace

std::vector<Stmt> next_tile_prefetches(const Expr& value, const TileLoops& loops,
                                       int64_t line_elems) {
  // The innermost register-tile loop that iterates, and the one around it.
  int inner = -1, outer = -1;
  for (int k = static_cast<int>(loops.s1.size()); k-- > 0;) {
    if (loops.s1_trips[k] <= 1) continue;
    if (inner < 0) {
      inner = k;
    } else {
      outer = k;
      break;
    }
  }
  std::vector<Stmt> hints;
  if (inner < 0) return hints;
  const ir::Var& in_var = loops.s1[inner];
  for (const Expr& load : first_load_per_buffer(value)) {
    const Expr& index = load->operands[0];
    ir::VarMap vm;
    int level = 0;
    if (ir::uses_var(index, in_var)) {
      // Read by the next register tile at these same steps: needed one tile from now.
      vm[in_var.get()] = in_var + int_imm(1);
      level = 1;
    } else if (outer >= 0 && ir::uses_var(index, loops.s1[outer])) {
      // Read by every tile of the next outer iteration: spread over this one's inner tiles,
      // step t of the inner sweep hints step t / trips of the next panel.
      const Expr t = in_var * int_imm(loops.steps) + loops.step;
      vm[loops.s1[outer].get()] = loops.s1[outer] + int_imm(1);
      vm[loops.step.get()] = ir::floordiv(t, int_imm(loops.s1_trips[inner]));
      level = 2;
    } else {
      continue;
    }
    for (const Expr& e : tile_lines(index, loops, vm, line_elems)) {
      hints.push_back(loop::make_prefetch(load->buffer, e, level));
    }
  }
  return hints;
}

}  // namespace tessera::schedule
