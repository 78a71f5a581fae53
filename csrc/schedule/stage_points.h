#pragma once
// What every CPU sketch of a stage builds its loops from: the grid of cache tiles, and the body's
// value and the output's stores at a point of the iteration space (lower_stage.cc,
// skewed_tiling.cc).
#include <string>
#include <vector>

#include "ir/expr.h"
#include "loop/stmt.h"
#include "schedule/lower_stage.h"

namespace tessera::schedule {

// ceil(n / t) for a positive constant t.
ir::Expr ceil_div(const ir::Expr& n, int64_t t);

// The conjunction of `conds` (true when empty).
ir::Expr all_of(const std::vector<ir::Expr>& conds);

// A tile index variable; its upper bound is known when the trip count is a constant.
ir::Var tile_var(const std::string& name, const ir::Expr& count);

// The cache tiles of a stage, flattened into one (parallel) loop: its variable, trip count, and
// the first point of the current tile along each axis.
struct TileGrid {
  ir::Var tile;
  ir::Expr total;
  std::vector<ir::Expr> extent;
  std::vector<ir::Expr> base;
};

TileGrid make_tile_grid(const ir::ComputeOpNode& op, const std::vector<int64_t>& tile_outer);

// Values and stores at a given point of a stage's iteration space.
class PointWriter {
 public:
  PointWriter(const StageBody& sb, const AccessLowering& al) : sb_(sb), al_(al) {}

  // Body value at the given axis and reduce-axis values, accesses lowered to loads.
  ir::Expr value(const std::vector<ir::Expr>& axes, const std::vector<ir::Expr>& raxes) const {
    return value_of(sb_.value, axes, raxes);
  }

  // The same for another body over the op's axes (e.g. one with reads made safe past the end).
  ir::Expr value_of(const ir::Expr& body, const std::vector<ir::Expr>& axes,
                    const std::vector<ir::Expr>& raxes) const;

  // Final value written for the finished result `acc` (epilogue applied when present).
  ir::Expr finish(const std::vector<ir::Expr>& axes, const ir::Expr& acc) const;

  ir::Expr out_index(const std::vector<ir::Expr>& axes) const;
  ir::Expr load_out(const std::vector<ir::Expr>& axes) const {
    return ir::load(sb_.out, out_index(axes));
  }
  loop::Stmt store_out(const std::vector<ir::Expr>& axes, const ir::Expr& v) const {
    return loop::make_store(sb_.out, out_index(axes), v);
  }

 private:
  const StageBody& sb_;
  const AccessLowering& al_;
};

}  // namespace tessera::schedule
