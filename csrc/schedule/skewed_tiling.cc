#include "schedule/skewed_tiling.h"

#include "ir/functor.h"
#include "ir/linear_form.h"
#include "ir/simplify.h"
#include "schedule/split_reduction.h"
#include "schedule/stage_points.h"
#include "util/check.h"

namespace tessera::schedule {

using ir::Expr;
using ir::Var;
using loop::ForKind;
using loop::Stmt;

namespace {

bool is_const(const Expr& e, int64_t value) { return e->is_const_int() && e->int_value == value; }

// `e` with v one step up and s one step down: the same point of the band in the next lane.
Expr along_band(const Expr& e, const Var& v, const Var& s) {
  ir::VarMap shift;
  shift[v.get()] = v + ir::int_imm(1);
  shift[s.get()] = s - ir::int_imm(1);
  return ir::simplify(ir::substitute(e, shift));
}

// Is `index` s + v + (terms free of both)? It must not move along the band, and must step by
// one with v.
bool indexes_sum(const Expr& index, const Var& v, const Var& s) {
  ir::VarMap along_v;
  along_v[v.get()] = v + ir::int_imm(1);
  return is_const(ir::simplify(along_band(index, v, s) - index), 0) &&
         is_const(ir::simplify(ir::substitute(index, along_v) - index), 1);
}

// The reads in `e` whose indices mention `v`.
std::vector<Expr> reads_along(const Expr& e, const Var& v) {
  std::vector<Expr> out;
  ir::visit_expr(e, [&](const Expr& x) {
    if (x->kind == ir::ExprKind::kAccess && ir::uses_var(x, v)) out.push_back(x);
  });
  return out;
}

// Does some select hold a read along `v` under a condition that changes along the band? A
// condition of s + v alone (tessera.op's where() keeping a band's read inside its tensor) holds
// at a window lane exactly when it holds at the valid points reading the same element, so its
// reads stay safe; any other guard might not.
bool reads_under_select(const Expr& value, const Var& v, const Var& s) {
  bool found = false;
  ir::visit_expr(value, [&](const Expr& e) {
    if (found || e->kind != ir::ExprKind::kSelect) return;
    const Expr& cond = e->operands[0];
    if (ir::expr_equal(along_band(cond, v, s), ir::simplify(cond))) return;
    for (const Expr& o : e->operands) found = found || !reads_along(o, v).empty();
  });
  return found;
}

bool has_const_extents(const ir::ComputeOpNode& op) {
  for (const ir::IterVar& iv : op.axes) {
    if (!iv.extent->is_const_int()) return false;
  }
  for (const ir::IterVar& iv : op.reduce_axes) {
    if (!iv.extent->is_const_int()) return false;
  }
  return true;
}

// The annotation's numbers fit the skewed nest: register tiles that divide the cache tiles of
// the axes other than v, whole vectors along v, a tile small enough to unroll.
bool tiles_fit(const ir::ComputeOpNode& op, const StageAnnotation& ann) {
  const size_t n = op.axes.size();
  const int v = ann.vector_axis;
  if (ann.tile_reg.size() != n || ann.tile_outer.size() != n ||
      ann.tile_reduce.size() != op.reduce_axes.size() || !ann.pack.empty()) {
    return false;
  }
  if (ann.vector_width < 1 || ann.tile_reg[v] < ann.vector_width ||
      ann.tile_reg[v] % ann.vector_width != 0 || ann.reduce_unroll < 1 || ann.reduce_unroll > 32) {
    return false;
  }
  int64_t points = ann.tile_reg[v];
  for (size_t a = 0; a < n; ++a) {
    if (static_cast<int>(a) == v) continue;
    if (ann.tile_reg[a] < 1 || ann.tile_outer[a] % ann.tile_reg[a] != 0) return false;
    points *= ann.tile_reg[a];
  }
  return points <= 1024;
}

class SkewedTiling {
 public:
  SkewedTiling(const StageBody& sb, const StageAnnotation& ann, const AccessLowering& al)
      : op_(*sb.op),
        ann_(ann),
        pw_(sb, al),
        dtype_(sb.dtype),
        n_(op_.axes.size()),
        m_(op_.reduce_axes.size()),
        v_(ann.vector_axis),
        s_(ann.skew_axis),
        vl_(ann.vector_width),
        columns_lanes_(ann.tile_reg[static_cast<size_t>(v_)]),
        band_(op_.axes[static_cast<size_t>(v_)].extent->int_value),
        window_(ann.tile_reg[static_cast<size_t>(s_)] - 1 + band_),
        grid_(make_tile_grid(op_, grid_tiles())) {
    for (size_t a = 0; a < n_; ++a) {
      const std::string& nm = op_.axes[a].var->name;
      if (is_v(a)) {
        column_ = ir::var(nm + "_c", 0, ir::kNoUpperBound);
        unroll_v_ = ir::var(nm + "_u", 0, columns_lanes_ / vl_ - 1);
        lane_ = ir::var(nm + "_v", 0, vl_ - 1);
        reg_tile_.emplace_back();
        rows_.emplace_back();
        base_.push_back(ir::int_imm(0));
        continue;
      }
      reg_tile_.push_back(ir::var(nm + "_m", 0, reg_trips(a) - 1));
      rows_.push_back(ir::var(nm + "_r", 0, ann_.tile_reg[a] - 1));
      base_.push_back(grid_.base[a] + reg_tile_[a] * ir::int_imm(ann_.tile_reg[a]));
    }
    for (const ir::IterVar& r : op_.reduce_axes) {
      reduce_.push_back(ir::var(r.var->name + "_k", 0, r.extent->int_value - 1));
    }
    acc_index_ = ir::int_imm(0);
    acc_size_ = columns_lanes_;
    for (size_t a = 0; a < n_; ++a) {
      if (is_v(a)) continue;
      acc_index_ = acc_index_ * ir::int_imm(ann_.tile_reg[a]) + rows_[a];
      acc_size_ *= ann_.tile_reg[a];
    }
    acc_index_ = acc_index_ * ir::int_imm(columns_lanes_) + unroll_v_ * ir::int_imm(vl_) + lane_;
  }

  Stmt build() const {
    const int64_t full_columns = window_ / columns_lanes_;
    std::vector<Stmt> fast;
    if (full_columns > 0) {
      fast.push_back(loop::make_for(column_, ir::int_imm(0), ir::int_imm(full_columns),
                                    ForKind::kSerial, column(column_, Expr(), Expr(), true)));
    }
    if (window_ % columns_lanes_ != 0) {
      const Expr last = ir::int_imm(full_columns);
      fast.push_back(column(last, ir::lt(window_lane(last), ir::int_imm(window_)), Expr(), true));
    }
    Stmt body = loop::make_seq(std::move(fast));
    std::vector<Expr> exists, full, rows_in;
    for (size_t a = 0; a < n_; ++a) {
      if (is_v(a)) continue;
      const int64_t ext = extent(a);
      if (ext % ann_.tile_outer[a] != 0) exists.push_back(ir::lt(base_[a], ir::int_imm(ext)));
      if (ext % ann_.tile_reg[a] != 0) {
        full.push_back(ir::le(base_[a] + ir::int_imm(ann_.tile_reg[a]), ir::int_imm(ext)));
        rows_in.push_back(ir::lt(base_[a] + rows_[a], ir::int_imm(ext)));
      }
    }
    if (!full.empty()) body = loop::make_if(all_of(full), body, edge_tile(all_of(rows_in)));
    if (!exists.empty()) body = loop::make_if(all_of(exists), body);
    return tile_loops(body);
  }

 private:
  bool is_v(size_t a) const { return static_cast<int>(a) == v_; }
  int64_t extent(size_t a) const { return op_.axes[a].extent->int_value; }
  int64_t reg_trips(size_t a) const { return ann_.tile_outer[a] / ann_.tile_reg[a]; }

  // Cache tiles: the annotation's, except one tile over the whole of v (the window).
  std::vector<int64_t> grid_tiles() const {
    std::vector<int64_t> t = ann_.tile_outer;
    t[static_cast<size_t>(v_)] = band_;
    return t;
  }

  // The window lane of the current register point in column `col`.
  Expr window_lane(const Expr& col) const {
    return col * ir::int_imm(columns_lanes_) + unroll_v_ * ir::int_imm(vl_) + lane_;
  }

  // The iteration point at window lane n of row r: v = n - r along the skew axis's row.
  std::vector<Expr> point_at(const Expr& col) const {
    std::vector<Expr> pt(n_);
    for (size_t a = 0; a < n_; ++a) {
      pt[a] = is_v(a) ? window_lane(col) - rows_[static_cast<size_t>(s_)] : base_[a] + rows_[a];
    }
    return pt;
  }

  // A register tile cut by the end of some axis: its rows past the end skipped, the window
  // bounded by the rows along s it has, inner steps not unrolled.
  Stmt edge_tile(const Expr& rows_in) const {
    const size_t s = static_cast<size_t>(s_);
    const Expr rows_s = ir::min(ir::int_imm(ann_.tile_reg[s]), ir::int_imm(extent(s)) - base_[s]);
    const Expr window = rows_s - ir::int_imm(1) + ir::int_imm(band_);
    const int64_t columns = (window_ + columns_lanes_ - 1) / columns_lanes_;
    return loop::make_for(column_, ir::int_imm(0), ir::int_imm(columns), ForKind::kSerial,
                          column(column_, ir::lt(window_lane(column_), window), rows_in, false));
  }

  // S3: rows unrolled, then the vectors of one column unrolled and their lanes vectorised.
  // `lanes_in` (lane-dependent) masks lanes; `rows_in` (uniform over lanes) skips rows.
  Stmt register_loops(Stmt body, const Expr& lanes_in, const Expr& rows_in) const {
    if (lanes_in.defined()) body = loop::make_if(lanes_in, body);
    body = loop::make_for(lane_, ir::int_imm(0), ir::int_imm(vl_),
                          vl_ > 1 ? ForKind::kVectorized : ForKind::kSerial, body);
    body = loop::make_for(unroll_v_, ir::int_imm(0), ir::int_imm(columns_lanes_ / vl_),
                          ForKind::kUnrolled, body);
    if (rows_in.defined()) body = loop::make_if(rows_in, body);
    for (size_t a = n_; a-- > 0;) {
      if (is_v(a)) continue;
      body = loop::make_for(rows_[a], ir::int_imm(0), ir::int_imm(ann_.tile_reg[a]),
                            ForKind::kUnrolled, body);
    }
    return body;
  }

  // The whole reduction around one step; the innermost axis in unrolled groups of
  // reduce_unroll steps when `unrolled`.
  Stmt reduce_loops(Stmt body, bool unrolled) const {
    for (size_t r = m_; r-- > 0;) {
      const int64_t ext = op_.reduce_axes[r].extent->int_value;
      const int64_t u = unrolled && r + 1 == m_ ? std::min(ann_.reduce_unroll, ext) : 1;
      if (u <= 1) {
        body = loop::make_for(reduce_[r], ir::int_imm(0), ir::int_imm(ext), ForKind::kSerial, body);
        continue;
      }
      const std::string& nm = reduce_[r]->name;
      const Var group = ir::var(nm + "_g", 0, ext / u - 1), step = ir::var(nm + "_s", 0, u - 1);
      Stmt grouped = loop::make_for(
          group, ir::int_imm(0), ir::int_imm(ext / u), ForKind::kSerial,
          loop::make_for(step, ir::int_imm(0), ir::int_imm(u), ForKind::kUnrolled,
                         loop::make_let(reduce_[r], group * ir::int_imm(u) + step, body)));
      if (ext % u != 0) {
        grouped =
            loop::make_seq({grouped, loop::make_for(reduce_[r], ir::int_imm(ext / u * u),
                                                    ir::int_imm(ext % u), ForKind::kSerial, body)});
      }
      body = grouped;
    }
    return body;
  }

  // One window column of one register tile: accumulators from the identity, the whole
  // reduction, then each row's band written.
  Stmt column(const Expr& col, const Expr& lanes_in, const Expr& rows_in, bool unrolled) const {
    const std::vector<Expr> pt = point_at(col);
    std::vector<Expr> k(reduce_.begin(), reduce_.end());
    ir::Buffer acc =
        ir::make_buffer("acc", dtype_, {ir::int_imm(acc_size_)}, ir::MemScope::kRegister);
    const Expr acc_val = ir::load(acc, acc_index_);
    Stmt init = register_loops(
        loop::make_store(acc, acc_index_, ir::reduce_identity(op_.reduce, dtype_)), Expr(), Expr());
    Stmt step =
        register_loops(loop::make_store(acc, acc_index_,
                                        ir::reduce_combine(op_.reduce, acc_val, pw_.value(pt, k))),
                       lanes_in, rows_in);
    const Expr v = pt[static_cast<size_t>(v_)];
    const Expr in_band = ir::logical_and(ir::ge(v, ir::int_imm(0)), ir::lt(v, ir::int_imm(band_)));
    Stmt write = register_loops(pw_.store_out(pt, pw_.finish(pt, acc_val)), in_band, rows_in);
    return loop::make_allocate(acc, loop::make_seq({init, reduce_loops(step, unrolled), write}));
  }

  // S2 inside S0: the register tiles of a cache tile in s1_order (v left out).
  Stmt tile_loops(Stmt body) const {
    const std::vector<int> order = ann_.s1_loop_order();
    for (size_t i = order.size(); i-- > 0;) {
      const size_t a = static_cast<size_t>(order[i]);
      if (is_v(a)) continue;
      body = loop::make_for(reg_tile_[a], ir::int_imm(0), ir::int_imm(reg_trips(a)),
                            ForKind::kSerial, body);
    }
    return loop::make_for(grid_.tile, ir::int_imm(0), grid_.total,
                          ann_.parallel ? ForKind::kParallel : ForKind::kSerial, body);
  }

  const ir::ComputeOpNode& op_;
  const StageAnnotation& ann_;
  const PointWriter pw_;
  const ir::DType dtype_;
  const size_t n_, m_;
  const int v_, s_;
  const int64_t vl_;
  const int64_t columns_lanes_;  // lanes of one window column (tile_reg[v])
  const int64_t band_;           // extent of v: the lanes each row writes
  const int64_t window_;         // rows along s - 1 + band_: the lanes a register tile computes
  const TileGrid grid_;
  std::vector<Var> reg_tile_, rows_;  // S2 and S3 per axis (undefined for v)
  std::vector<Expr> base_;            // first point of the register tile per axis (0 for v)
  std::vector<Var> reduce_;
  Var column_, unroll_v_, lane_;
  Expr acc_index_;
  int64_t acc_size_ = 1;
};

}  // namespace

bool skewed_tiling_applies(const ir::ComputeOpNode& op, const Expr& value, ir::DType dtype,
                           const StageAnnotation& ann) {
  const int n = static_cast<int>(op.axes.size());
  const int v = ann.vector_axis, s = ann.skew_axis;
  if (ann.sketch != Sketch::kMultiLevelTiling || v < 0 || s < 0 || v >= n || s >= n || v == s) {
    return false;
  }
  if (op.reduce_axes.empty() || op.reduce == ir::ReduceKind::kNone || !has_const_extents(op)) {
    return false;
  }
  if (is_long_float_sum(op, dtype)) return false;
  if (!tiles_fit(op, ann)) return false;
  const Var& vv = op.axes[static_cast<size_t>(v)].var;
  const Var& sv = op.axes[static_cast<size_t>(s)].var;
  if (reads_under_select(value, vv, sv)) return false;
  for (const Expr& read : reads_along(value, vv)) {
    int along = 0;
    for (const Expr& index : read->operands) {
      if (ir::uses_var(index, vv)) {
        ++along;
        if (!indexes_sum(index, vv, sv)) return false;
      } else if (ir::uses_var(index, sv)) {
        return false;
      }
    }
    if (along != 1) return false;
  }
  return true;
}

int find_skew_axis(const ir::ComputeOpNode& op, const Expr& value, ir::DType dtype,
                   int vector_axis) {
  const int n = static_cast<int>(op.axes.size());
  if (vector_axis < 0 || vector_axis >= n ||
      reads_along(value, op.axes[static_cast<size_t>(vector_axis)].var).empty()) {
    return -1;
  }
  StageAnnotation probe;
  probe.vector_axis = vector_axis;
  probe.tile_outer.assign(static_cast<size_t>(n), 1);
  probe.tile_reg.assign(static_cast<size_t>(n), 1);
  probe.tile_reduce.assign(op.reduce_axes.size(), 1);
  for (int a = n - 1; a >= 0; --a) {
    const Expr& ext = op.axes[static_cast<size_t>(a)].extent;
    if (a == vector_axis || !ext->is_const_int() || ext->int_value < 2) continue;
    probe.skew_axis = a;
    if (skewed_tiling_applies(op, value, dtype, probe)) return a;
  }
  return -1;
}

Stmt lower_skewed_tiling(const StageBody& sb, const StageAnnotation& ann,
                         const AccessLowering& al) {
  TESSERA_CHECK(skewed_tiling_applies(*sb.op, sb.value, sb.dtype, ann))
      << "stage " << sb.op->name << ": the skewed tile does not apply to this stage";
  return SkewedTiling(sb, ann, al).build();
}

}  // namespace tessera::schedule
