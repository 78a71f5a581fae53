#include "schedule/lower_stage.h"

#include <functional>

#include "ir/functor.h"
#include "schedule/local_padding.h"
#include "schedule/split_reduction.h"
#include "schedule/stage_points.h"
#include "schedule/tile_prefetch.h"
#include "util/check.h"

namespace tessera::schedule {

using ir::Expr;
using ir::Var;
using loop::ForKind;
using loop::Stmt;

namespace {

// The annotation with its inner reduce tile cut to at most kSumChunk steps for a long float sum:
// the register accumulators then restart every kSumChunk values and the partials add up in the
// output, a two-level cascade whatever tile a tuner chose.
StageAnnotation with_bounded_sum_tile(const ir::ComputeOpNode& op, ir::DType dtype,
                                      StageAnnotation ann) {
  if (!is_long_float_sum(op, dtype)) return ann;
  std::vector<int64_t>& tiles = ann.tile_reduce;
  // Product of tiles[from..], saturating just above kSumChunk.
  auto product_from = [&](size_t from) {
    int64_t p = 1;
    for (size_t r = from; r < tiles.size(); ++r) {
      p = std::min(kSumChunk + 1, p * std::min(kSumChunk + 1, tiles[r]));
    }
    return p;
  };
  // Outer axes are cut first, each only as far as needed.
  for (size_t r = 0; r < tiles.size() && product_from(0) > kSumChunk; ++r) {
    const int64_t inner = product_from(r + 1);
    tiles[r] = inner > kSumChunk ? 1 : std::max<int64_t>(1, kSumChunk / inner);
  }
  return ann;
}

void check_annotation(const ir::ComputeOpNode& op, const StageAnnotation& ann) {
  const size_t n = op.axes.size(), m = op.reduce_axes.size();
  TESSERA_CHECK(ann.tile_outer.size() == n && ann.tile_reg.size() == n)
      << "stage " << op.name << ": annotation has " << ann.tile_outer.size() << "/"
      << ann.tile_reg.size() << " spatial tiles for " << n << " axes";
  TESSERA_CHECK(ann.tile_reduce.size() == m)
      << "stage " << op.name << ": annotation has " << ann.tile_reduce.size()
      << " reduce tiles for " << m << " reduce axes";
  TESSERA_CHECK(ann.tile_mid.empty() || ann.tile_mid.size() == n)
      << "stage " << op.name << ": annotation has " << ann.tile_mid.size() << " mid tiles for " << n
      << " axes";
  const std::vector<int64_t> mid = ann.mid_tiles();
  int64_t reg_points = 1;
  for (size_t a = 0; a < n; ++a) {
    TESSERA_CHECK(ann.tile_reg[a] >= 1 && mid[a] >= ann.tile_reg[a] &&
                  mid[a] % ann.tile_reg[a] == 0 && ann.tile_outer[a] % mid[a] == 0)
        << "stage " << op.name << ": axis " << a << " needs register tile " << ann.tile_reg[a]
        << " | mid tile " << mid[a] << " | cache tile " << ann.tile_outer[a];
    reg_points *= ann.tile_reg[a];
  }
  TESSERA_CHECK(reg_points <= 1024) << "stage " << op.name << ": register tile of " << reg_points
                                    << " points is too large to unroll";
  for (int64_t t : ann.tile_reduce) TESSERA_CHECK(t >= 1) << "reduce tiles must be positive";
  TESSERA_CHECK(ann.reduce_unroll >= 1 && ann.reduce_unroll <= 32)
      << "stage " << op.name << ": reduce_unroll " << ann.reduce_unroll << " not in [1, 32]";
  if (ann.vector_axis >= 0) {
    TESSERA_CHECK(ann.vector_axis < static_cast<int>(n)) << "vector axis out of range";
    TESSERA_CHECK(ann.vector_width >= 1 && ann.tile_reg[ann.vector_axis] % ann.vector_width == 0)
        << "stage " << op.name << ": register tile of the vector axis ("
        << ann.tile_reg[ann.vector_axis] << ") must be a multiple of the vector width ("
        << ann.vector_width << ")";
  }
}

// SSRSRS multi-level tiling of one stage, one member per level of the loop nest, outside in:
//   S0 S1 R0 S2   tile_loops       one (parallel) loop over all cache tiles, the mid tiles of a
//                                  cache tile, the outer reduce tiles, the register tiles of a
//                                  mid tile
//   edge tiles    edge_split       which register tile runs where (see there; ann.edge)
//   S3            register_loops   the register tile: rows unrolled, the vector axis as unrolled
//                                  vectors of lanes
//   R1            reduce_loops     the inner reduce steps, the innermost unrolled in groups
// Accumulators live per register tile over one outer reduce tile (R0 iteration) and pass through
// the output between R0 iterations (init_accumulators / write_back); the epilogue runs at the
// last one. R0 sits outside S2, so every register tile of a mid tile finishes its whole
// reduction before the S1 loop moves on, and its epilogue sees the complete value.
// The constructor makes every loop variable, in the order the nest has always made them (the
// simplifier orders terms by variable id, so the order shows in the lowered code); the S1 mid
// tile variables exist only for axes with more than one mid tile per cache tile, so a schedule
// without a mid level lowers to exactly the three-level nest.
class MultiLevelTiling {
 public:
  MultiLevelTiling(const StageBody& sb, const StageAnnotation& requested, const AccessLowering& al)
      : sb_(sb),
        op_(*sb.op),
        ann_(checked(op_, sb.dtype, requested)),
        pw_(sb, al),
        n_(op_.axes.size()),
        m_(op_.reduce_axes.size()),
        vaxis_(ann_.vector_axis),
        vl_(vaxis_ >= 0 ? ann_.vector_width : 1),
        restart_(is_long_float_sum(op_, sb.dtype)),
        grid_(make_tile_grid(op_, ann_.tile_outer)),
        mid_(ann_.mid_tiles()),
        cut_(cuttable_axes(op_, ann_)),
        safe_(make_safe_reads(sb.value, op_, cut_, ann_.tile_reg, vaxis_, al)) {
    make_reduce_vars();
    make_mid_vars();
    make_s2_vars();
    make_s3_vars();
    order_ = ann_.s1_loop_order();
    TESSERA_CHECK(order_.size() == n_) << "s1_order must list every spatial axis once";
  }

  Stmt build() {
    switch (ann_.edge) {
      case EdgeMode::kSplit:
        return tile_loops(edge_split(register_tile(fast_tile()), scalar_tile()));
      case EdgeMode::kLocalPad:
        return tile_loops(local_pad_tiles());
      case EdgeMode::kGuard:
        return tile_loops(loop::make_if(tile_exists(), register_tile(guarded_tile())));
    }
    TESSERA_FAIL() << "unknown edge mode";
  }

 private:
  using Wrap = std::function<Stmt(Stmt)>;

  // How the register-tile loops (S3) bound a tile that the end of the iteration space may cut.
  struct Bounds {
    bool serial_rows = false;  // non-vector axes loop over what is left of the tile, serially
    bool guard_rows = false;   // non-vector axes unrolled in full, the body skipped past the end
    bool mask_lanes = false;   // lanes past the end of the vector axis masked off
  };

  // One register tile's code: the bounds of each of its parts, and what the compute reads.
  struct TileVariant {
    Bounds compute;           // accumulators initialised to the identity and updated
    Bounds load;              // accumulators initialised from the output (outer reduce tiles)
    Bounds write;             // write-back
    bool unrolled = true;     // inner reduce steps unrolled and hinted as the schedule says
    bool safe_reads = false;  // reads made safe past the end (local_padding.h)
  };

  // Axes along which a register tile may be cut: a tile of one point is never cut, nor one that
  // divides a constant extent.
  static std::vector<bool> cuttable_axes(const ir::ComputeOpNode& op, const StageAnnotation& ann) {
    std::vector<bool> cut(op.axes.size());
    for (size_t a = 0; a < cut.size(); ++a) {
      const Expr& ext = op.axes[a].extent;
      const bool divides = ext->is_const_int() && ext->int_value % ann.tile_reg[a] == 0;
      cut[a] = ann.tile_reg[a] > 1 && !divides;
    }
    return cut;
  }

  bool rows_cuttable() const {
    for (size_t a = 0; a < n_; ++a) {
      if (cut_[a] && !is_vector_axis(a)) return true;
    }
    return false;
  }
  bool lanes_cuttable() const { return vaxis_ >= 0 && cut_[vaxis_]; }

  // Does the register tile hold at least one point of the iteration space?
  Expr tile_exists() const {
    std::vector<Expr> c;
    for (size_t a = 0; a < n_; ++a) c.push_back(ir::lt(base1_[a], grid_.extent[a]));
    return all_of(c);
  }

  static TileVariant fast_tile() { return {}; }

  // kSplit's edge variants: rows (and lanes) bounded in every part, inner steps not unrolled.
  static TileVariant split_edge_tile(bool partial_lanes) {
    TileVariant v;
    v.compute = v.load = v.write = Bounds{true, false, partial_lanes};
    v.unrolled = false;
    return v;
  }

  // kLocalPad: the full tile's code on safe reads; rows past the end skipped and lanes past it
  // masked only where something is read from or written to the output. The compute masks
  // lanes only when some read along the vector axis is not padded. `unrolled`: inner reduce
  // steps unrolled and hinted as in full tiles.
  TileVariant local_pad_tile(bool lanes_cut, bool unrolled) const {
    TileVariant v;
    v.compute.mask_lanes = lanes_cut && !safe_.lanes_padded;
    v.load.mask_lanes = lanes_cut;
    v.write = Bounds{false, rows_cuttable(), lanes_cut};
    v.unrolled = unrolled;
    v.safe_reads = true;
    return v;
  }

  // kGuard: every part predicated on every point, in the inner reduce loop too.
  TileVariant guarded_tile() const {
    const Bounds all{false, rows_cuttable(), lanes_cuttable()};
    TileVariant v;
    v.compute = v.load = v.write = all;
    return v;
  }

  // kLocalPad's tiles. When every read is safe as it is (zero-filled panels along the cut
  // axes), full tiles and tiles cut along rows run one body: the full tile's plus a bounded
  // write-back. Otherwise clamped reads would cost full tiles an address computation per row
  // and step, so full tiles keep the full tile's body and tiles cut along rows run the padded
  // one, its inner reduce steps not unrolled (compile time, as kSplit's edge variants). A tile
  // cut along the vector axis masks its lanes.
  Stmt local_pad_tiles() const {
    // Only cuttable row axes are clamped, so two bodies imply rows_cuttable().
    const bool one_body = safe_.value.same_as(sb_.value);
    Stmt body = register_tile(local_pad_tile(false, one_body));
    if (!one_body) {
      body = loop::make_if(all_of(full_conditions(false)), register_tile(fast_tile()), body);
    }
    if (lanes_cuttable()) {
      body = loop::make_if(all_of(full_conditions(true)), body,
                           register_tile(local_pad_tile(true, false)));
    }
    return loop::make_if(tile_exists(), body);
  }

  // Does the register tile lie before the end of each cuttable axis (the vector axis when
  // `vector`, else the others)?
  std::vector<Expr> full_conditions(bool vector) const {
    std::vector<Expr> c;
    for (size_t a = 0; a < n_; ++a) {
      if (cut_[a] && is_vector_axis(a) == vector) {
        c.push_back(ir::le(base1_[a] + ir::int_imm(ann_.tile_reg[a]), grid_.extent[a]));
      }
    }
    return c;
  }

  static StageAnnotation checked(const ir::ComputeOpNode& op, ir::DType dtype,
                                 const StageAnnotation& requested) {
    check_annotation(op, requested);
    return with_bounded_sum_tile(op, dtype, requested);
  }

  // R0 / R1: the outer reduce tile ro and the step ri inside it, per reduce axis.
  void make_reduce_vars() {
    ro_.resize(m_);
    ri_.resize(m_);
    rcount_.resize(m_);
    rext_.resize(m_);
    rval_.resize(m_);
    std::vector<Expr> first_c, last_c;
    for (size_t r = 0; r < m_; ++r) {
      const std::string nm = op_.reduce_axes[r].var->name;
      // At least one outer tile: a sum over a size that is 0 at run time still runs one (its
      // inner loops have no trips), so the identity is written instead of nothing.
      rcount_[r] =
          ir::max(ceil_div(op_.reduce_axes[r].extent, ann_.tile_reduce[r]), ir::int_imm(1));
      ro_[r] = tile_var(nm + "_o", rcount_[r]);
      ri_[r] = ir::var(nm + "_i", 0, ann_.tile_reduce[r] - 1);
      Expr start = ro_[r] * ir::int_imm(ann_.tile_reduce[r]);
      rext_[r] = ir::min(ir::int_imm(ann_.tile_reduce[r]), op_.reduce_axes[r].extent - start);
      rval_[r] = start + ri_[r];
    }
    for (size_t r = 0; r < m_; ++r) {
      first_c.push_back(ir::eq(ro_[r], ir::int_imm(0)));
      last_c.push_back(ir::eq(ro_[r], rcount_[r] - ir::int_imm(1)));
    }
    first_ = all_of(first_c);
    last_ = all_of(last_c);
  }

  // S1: the mid tile inside the cache tile, and its first point. An axis with one mid tile per
  // cache tile has no variable (its mid tile starts where the cache tile does).
  void make_mid_vars() {
    mid_tile_.resize(n_);
    base_mid_.resize(n_);
    for (size_t a = 0; a < n_; ++a) {
      base_mid_[a] = grid_.base[a];
      if (mid_trips(a) == 1) continue;
      mid_tile_[a] = ir::var(op_.axes[a].var->name + "_mt", 0, mid_trips(a) - 1);
      base_mid_[a] = base_mid_[a] + mid_tile_[a] * ir::int_imm(mid_[a]);
    }
  }

  // S2: the register tile inside the mid tile, and its first point.
  void make_s2_vars() {
    reg_tile_.resize(n_);
    base1_.resize(n_);
    for (size_t a = 0; a < n_; ++a) {
      reg_tile_[a] = ir::var(op_.axes[a].var->name + "_m", 0, reg_trips(a) - 1);
      base1_[a] = base_mid_[a] + reg_tile_[a] * ir::int_imm(ann_.tile_reg[a]);
    }
  }

  int64_t mid_trips(size_t a) const { return ann_.tile_outer[a] / mid_[a]; }
  int64_t reg_trips(size_t a) const { return mid_[a] / ann_.tile_reg[a]; }

  // S3: the point inside the register tile, and its accumulator. Accumulator layout: non-vector
  // axes in order, then the vector axis innermost, so that each vector of lanes is contiguous in
  // the accumulator (it becomes one SIMD register).
  void make_s3_vars() {
    s3_.resize(n_);
    point_.resize(n_);
    for (size_t a = 0; a < n_; ++a) {
      if (is_vector_axis(a)) {
        unroll_v_ = ir::var(op_.axes[a].var->name + "_u", 0, ann_.tile_reg[a] / vl_ - 1);
        lane_ = ir::var(op_.axes[a].var->name + "_v", 0, vl_ - 1);
        point_[a] = base1_[a] + unroll_v_ * ir::int_imm(vl_) + lane_;
      } else {
        s3_[a] = ir::var(op_.axes[a].var->name + "_r", 0, ann_.tile_reg[a] - 1);
        point_[a] = base1_[a] + s3_[a];
      }
    }
    acc_index_ = ir::int_imm(0);
    acc_size_ = 1;
    for (size_t a = 0; a < n_; ++a) {
      if (is_vector_axis(a)) continue;
      acc_index_ = acc_index_ * ir::int_imm(ann_.tile_reg[a]) + s3_[a];
      acc_size_ *= ann_.tile_reg[a];
    }
    if (vaxis_ >= 0) {
      acc_index_ =
          acc_index_ * ir::int_imm(ann_.tile_reg[vaxis_]) + unroll_v_ * ir::int_imm(vl_) + lane_;
      acc_size_ *= ann_.tile_reg[vaxis_];
    }
  }

  bool is_vector_axis(size_t a) const { return static_cast<int>(a) == vaxis_; }

  // Across outer reduce tiles, accumulators normally carry on from the output's value. A long
  // float sum instead restarts them from zero at each tile and adds them into the output at the
  // end of it: a two-level cascade, so no accumulator combines more than kSumChunk values.
  Stmt init_accumulators(const Stmt& from_identity, const Stmt& from_output) const {
    return restart_ ? from_identity : loop::make_if(first_, from_identity, from_output);
  }

  // Writes `acc` at `pt` (through `w`, the register-tile loops): the epilogue applies after the
  // last tile; a restarting sum adds its earlier tiles' partial first.
  Stmt write_back(const Wrap& w, const std::vector<Expr>& pt, const Expr& acc) const {
    if (!restart_) return store_result(w, pt, acc);
    return loop::make_if(
        first_, store_result(w, pt, acc),
        store_result(w, pt, ir::reduce_combine(op_.reduce, pw_.load_out(pt), acc)));
  }

  Stmt store_result(const Wrap& w, const std::vector<Expr>& pt, const Expr& v) const {
    if (!sb_.epilogue.defined()) return w(pw_.store_out(pt, v));
    return loop::make_if(last_, w(pw_.store_out(pt, pw_.finish(pt, v))), w(pw_.store_out(pt, v)));
  }

  // R1: the inner reduce loops around a register-tile step. The innermost one runs `unroll`
  // steps per iteration (a remainder loop takes what is left): the loop's own counter and branch
  // otherwise compete with the FMAs for issue ports. `hints` (written for the group's first step)
  // open each unrolled group.
  Stmt reduce_loops(Stmt body, int64_t unroll, std::vector<Stmt> hints) const {
    for (size_t r = m_; r-- > 0;) {
      const int64_t u = r + 1 == m_ ? unroll : 1;
      if (u == 1) {
        body = loop::make_for(ri_[r], ir::int_imm(0), rext_[r], ForKind::kSerial, body);
        continue;
      }
      const std::string nm = ri_[r]->name;
      Var group = ir::var(nm + "_g", 0, ir::kNoUpperBound), step = ir::var(nm + "_u", 0, u - 1);
      const Expr groups = ir::floordiv(rext_[r], ir::int_imm(u));
      const Expr done = groups * ir::int_imm(u);
      const Expr first_step = group * ir::int_imm(u);
      Stmt group_body =
          loop::make_seq({loop::make_let(ri_[r], first_step, loop::make_seq(std::move(hints))),
                          loop::make_for(step, ir::int_imm(0), ir::int_imm(u), ForKind::kUnrolled,
                                         loop::make_let(ri_[r], first_step + step, body))});
      Stmt unrolled = loop::make_for(group, ir::int_imm(0), groups, ForKind::kSerial, group_body);
      hints.clear();
      Stmt rest = loop::make_for(ri_[r], done, rext_[r] - done, ForKind::kSerial, body);
      body = loop::make_seq({unrolled, rest});
    }
    return body;
  }

  // S3: the register tile loops. With `serial_rows`, the non-vector axes run serially over what
  // is left of the tile (the vector axis is still full): the accumulators then live in memory,
  // but the inner loop keeps its vector code, so edge tiles along rows stay fast. With
  // `guard_rows` they stay unrolled in full and the body is skipped for rows past the end. With
  // `mask_lanes` the tile is cut along the vector axis: lanes past the end are masked off
  // (masked loads and stores in the vector code) instead of falling back to scalar loops.
  Stmt register_loops(Stmt body, const Bounds& b) const {
    if (vaxis_ >= 0) {
      if (b.mask_lanes) {
        body = loop::make_if(ir::lt(point_[vaxis_], grid_.extent[vaxis_]), body);
      }
      body = loop::make_for(lane_, ir::int_imm(0), ir::int_imm(vl_),
                            vl_ > 1 ? ForKind::kVectorized : ForKind::kSerial, body);
      body = loop::make_for(unroll_v_, ir::int_imm(0), ir::int_imm(ann_.tile_reg[vaxis_] / vl_),
                            ForKind::kUnrolled, body);
    }
    if (b.guard_rows) {
      std::vector<Expr> rows_in;
      for (size_t a = 0; a < n_; ++a) {
        if (cut_[a] && !is_vector_axis(a)) rows_in.push_back(ir::lt(point_[a], grid_.extent[a]));
      }
      body = loop::make_if(all_of(rows_in), body);
    }
    for (size_t a = n_; a-- > 0;) {
      if (is_vector_axis(a)) continue;
      if (b.serial_rows) {
        Expr ext = ir::min(ir::int_imm(ann_.tile_reg[a]), grid_.extent[a] - base1_[a]);
        body = loop::make_for(s3_[a], ir::int_imm(0), ext, ForKind::kSerial, body);
      } else {
        body = loop::make_for(s3_[a], ir::int_imm(0), ir::int_imm(ann_.tile_reg[a]),
                              ForKind::kUnrolled, body);
      }
    }
    return body;
  }

  // Prefetch hints for the full register tiles' inner reduce steps (partial tiles are rare).
  std::vector<Stmt> prefetches() const {
    TileLoops loops;
    for (int a : order_) {
      loops.s1.push_back(reg_tile_[a]);
      loops.s1_trips.push_back(reg_trips(a));
      if (a == vaxis_) continue;
      loops.rows.push_back(s3_[a]);
      loops.row_trips.push_back(ann_.tile_reg[a]);
    }
    if (vaxis_ >= 0) {
      loops.vector_unroll = unroll_v_;
      loops.vector_unrolls = ann_.tile_reg[vaxis_] / vl_;
      loops.lane = lane_;
    }
    loops.step = ri_[m_ - 1];
    loops.steps = ann_.tile_reduce[m_ - 1];
    const int64_t line_elems = 64 / ir::dtype_bytes(sb_.dtype);
    return next_tile_prefetches(pw_.value(point_, rval_), loops, line_elems);
  }

  // The register tile's point with every cuttable non-vector axis clamped into its extent: an
  // address that is valid for every point of a cut tile (the vector axis is masked instead).
  std::vector<Expr> clamped_point() const {
    std::vector<Expr> pt = point_;
    for (size_t a = 0; a < n_; ++a) {
      if (cut_[a] && !is_vector_axis(a)) pt[a] = ir::min(pt[a], grid_.extent[a] - ir::int_imm(1));
    }
    return pt;
  }

  // One register tile (see TileVariant): accumulators initialised, updated over the inner
  // reduce steps and written back.
  Stmt register_tile(const TileVariant& v) const {
    const Wrap compute = [&](Stmt b) { return register_loops(std::move(b), v.compute); };
    const Wrap load = [&](Stmt b) { return register_loops(std::move(b), v.load); };
    const Wrap write = [&](Stmt b) { return register_loops(std::move(b), v.write); };
    // Without a reduction the value is computed where it is written, under the write's bounds.
    if (m_ == 0) return write(pw_.store_out(point_, pw_.value(point_, {})));
    ir::Buffer acc =
        ir::make_buffer("acc", sb_.dtype, {ir::int_imm(acc_size_)}, ir::MemScope::kRegister);
    Expr acc_val = ir::load(acc, acc_index_);
    const Expr value =
        v.safe_reads ? pw_.value_of(safe_.value, point_, rval_) : pw_.value(point_, rval_);
    const Expr earlier = pw_.load_out(v.safe_reads ? clamped_point() : point_);
    Stmt init = init_accumulators(
        compute(loop::make_store(acc, acc_index_, ir::reduce_identity(op_.reduce, sb_.dtype))),
        load(loop::make_store(acc, acc_index_, earlier)));
    Stmt step =
        compute(loop::make_store(acc, acc_index_, ir::reduce_combine(op_.reduce, acc_val, value)));
    // Only the common tiles are unrolled and hinted: edge tiles are rare, and unrolling their
    // loops too would double the kernel's compile time. Hints open unrolled groups, so without
    // groups there is nothing to plan.
    const bool hinted = ann_.prefetch && ann_.reduce_unroll > 1;
    Stmt update = v.unrolled ? reduce_loops(step, ann_.reduce_unroll,
                                            hinted ? prefetches() : std::vector<Stmt>{})
                             : reduce_loops(step, 1, {});
    Stmt out = write_back(write, point_, acc_val);
    return loop::make_allocate(acc, loop::make_seq({init, update, out}));
  }

  // Partial register tiles without vector code: plain loops over what is left of the tile, one
  // scalar accumulator.
  Stmt scalar_tile() const {
    std::vector<Var> pv(n_);
    std::vector<Expr> ppoint(n_);
    for (size_t a = 0; a < n_; ++a) {
      pv[a] = ir::var(op_.axes[a].var->name + "_p", 0, ann_.tile_reg[a] - 1);
      ppoint[a] = base1_[a] + pv[a];
    }
    std::vector<Var> pri(m_);
    std::vector<Expr> prval(m_);
    for (size_t r = 0; r < m_; ++r) {
      pri[r] = ir::var(op_.reduce_axes[r].var->name + "_t", 0, ann_.tile_reduce[r] - 1);
      prval[r] = ro_[r] * ir::int_imm(ann_.tile_reduce[r]) + pri[r];
    }
    Stmt slow;
    if (m_ > 0) {
      ir::Buffer acc1 =
          ir::make_buffer("acc1", sb_.dtype, {ir::int_imm(1)}, ir::MemScope::kRegister);
      Expr a1 = ir::load(acc1, ir::int_imm(0));
      Stmt upd = loop::make_store(acc1, ir::int_imm(0),
                                  ir::reduce_combine(op_.reduce, a1, pw_.value(ppoint, prval)));
      for (size_t r = m_; r-- > 0;) {
        upd = loop::make_for(pri[r], ir::int_imm(0), rext_[r], ForKind::kSerial, upd);
      }
      Stmt init = init_accumulators(
          loop::make_store(acc1, ir::int_imm(0), ir::reduce_identity(op_.reduce, sb_.dtype)),
          loop::make_store(acc1, ir::int_imm(0), pw_.load_out(ppoint)));
      Stmt write = write_back([](Stmt s) { return s; }, ppoint, a1);
      slow = loop::make_allocate(acc1, loop::make_seq({init, upd, write}));
    } else {
      slow = pw_.store_out(ppoint, pw_.value(ppoint, {}));
    }
    for (size_t a = n_; a-- > 0;) {
      Expr ext = ir::min(ir::int_imm(ann_.tile_reg[a]), grid_.extent[a] - base1_[a]);
      slow = loop::make_for(pv[a], ir::int_imm(0), ext, ForKind::kSerial, slow);
    }
    return slow;
  }

  // Edge tiles. A register tile that lies inside the iteration space takes `fast` (rows and
  // vectors unrolled, accumulators in registers, reduce steps unrolled and hinted); one cut only
  // along rows keeps vector code over what is left of the rows; one cut along the vector axis
  // runs it with the lanes past the end masked off; without a vector axis a cut tile runs
  // `slow`. A tile wholly outside (cache tiles past the end) does nothing.
  //
  // This split is a step of the tiling, not a loop-IR pass that partitions one guarded nest:
  // the variants are different code by design (unrolling, register accumulators, prefetch hints
  // and reduce unrolling only in full tiles), so a pass could not derive them from the guards.
  Stmt edge_split(const Stmt& fast, const Stmt& slow) const {
    std::vector<Expr> exists_c, full_rows_c;
    Expr full_vec = ir::bool_imm(true);
    for (size_t a = 0; a < n_; ++a) {
      exists_c.push_back(ir::lt(base1_[a], grid_.extent[a]));
      Expr full = ir::le(base1_[a] + ir::int_imm(ann_.tile_reg[a]), grid_.extent[a]);
      if (is_vector_axis(a)) {
        full_vec = full;
      } else {
        full_rows_c.push_back(full);
      }
    }
    Stmt partial = slow;
    if (vaxis_ >= 0) {
      partial = loop::make_if(full_vec, register_tile(split_edge_tile(false)),
                              vl_ > 1 ? register_tile(split_edge_tile(true)) : slow);
    }
    return loop::make_if(
        all_of(exists_c),
        loop::make_if(ir::logical_and(full_vec, all_of(full_rows_c)), fast, partial));
  }

  // S2 inside R0 inside S1 inside S0. A mid tile wholly past the end of an axis (in the last
  // cache tile) is skipped before its reduce loops.
  Stmt tile_loops(Stmt tile_body) const {
    for (size_t k = n_; k-- > 0;) {
      int a = order_[k];
      tile_body = loop::make_for(reg_tile_[a], ir::int_imm(0), ir::int_imm(reg_trips(a)),
                                 ForKind::kSerial, tile_body);
    }
    for (size_t r = m_; r-- > 0;) {
      tile_body = loop::make_for(ro_[r], ir::int_imm(0), rcount_[r], ForKind::kSerial, tile_body);
    }
    std::vector<Expr> mid_exists;
    for (size_t a = 0; a < n_; ++a) {
      if (mid_tile_[a].defined()) mid_exists.push_back(ir::lt(base_mid_[a], grid_.extent[a]));
    }
    if (!mid_exists.empty()) tile_body = loop::make_if(all_of(mid_exists), tile_body);
    for (size_t k = n_; k-- > 0;) {
      int a = order_[k];
      if (!mid_tile_[a].defined()) continue;
      tile_body = loop::make_for(mid_tile_[a], ir::int_imm(0), ir::int_imm(mid_trips(a)),
                                 ForKind::kSerial, tile_body);
    }
    return loop::make_for(grid_.tile, ir::int_imm(0), grid_.total,
                          ann_.parallel ? ForKind::kParallel : ForKind::kSerial, tile_body);
  }

  const StageBody& sb_;
  const ir::ComputeOpNode& op_;
  const StageAnnotation ann_;  // as requested, inner reduce tile bounded for long float sums
  const PointWriter pw_;
  const size_t n_, m_;  // spatial and reduce axes
  const int vaxis_;
  const int64_t vl_;
  const bool restart_;  // accumulators restart at each outer reduce tile
  const TileGrid grid_;
  // R0 / R1.
  std::vector<Var> ro_, ri_;
  std::vector<Expr> rcount_, rext_, rval_;
  Expr first_, last_;  // first / last outer reduce tile
  // S1 (mid tiles; undefined on axes with one mid tile per cache tile).
  const std::vector<int64_t> mid_;  // mid tile per axis
  // Edges: the axes a register tile may be cut along, and the body with reads safe past them.
  const std::vector<bool> cut_;
  const SafeReads safe_;
  std::vector<Var> mid_tile_;
  std::vector<Expr> base_mid_;
  std::vector<int> order_;  // S1 and S2 loop order
  // S2.
  std::vector<Var> reg_tile_;
  std::vector<Expr> base1_;
  // S3.
  std::vector<Var> s3_;
  Var unroll_v_, lane_;
  std::vector<Expr> point_;
  Expr acc_index_;
  int64_t acc_size_ = 1;
};

}  // namespace

StageBody make_stage_body(const Stage& stage, const StagePlan& plan, const AccessLowering& al) {
  StageBody sb;
  sb.op = stage.op->op.get();
  sb.value = inline_body(stage.op, plan.inlined);
  sb.dtype = stage.op->dtype;
  sb.out = al.buffer_of(stage.written().get());
  if (stage.epilogue) {
    sb.acc_var = ir::var("acc", ir::kNoLowerBound, ir::kNoUpperBound, stage.op->dtype);
    sb.epilogue = epilogue_over_op_axes(stage, plan.inlined, sb.acc_var);
    const AxisGroups map = epilogue_axis_map(stage);
    bool identity = map.size() == sb.op->axes.size();
    for (size_t a = 0; identity && a < map.size(); ++a) {
      identity = map[a] == std::vector<int>{static_cast<int>(a)};
    }
    if (!identity) sb.out_axes = map;
  }
  return sb;
}

Stmt lower_multi_level_tiling(const StageBody& sb, const StageAnnotation& ann,
                              const AccessLowering& al) {
  return MultiLevelTiling(sb, ann, al).build();
}

Stmt lower_cross_lane_reduction(const StageBody& sb, const StageAnnotation& ann,
                                const AccessLowering& al) {
  const ir::ComputeOpNode& op = *sb.op;
  const size_t n = op.axes.size(), m = op.reduce_axes.size();
  TESSERA_CHECK(m >= 1) << "cross-lane reduction needs a reduce axis (" << op.name << ")";
  TESSERA_CHECK(ann.tile_outer.size() == n) << "stage " << op.name << ": bad tile_outer";
  const int64_t vl = ann.vector_width;
  TESSERA_CHECK(vl >= 1) << "vector width must be positive";
  PointWriter pw(sb, al);

  const TileGrid grid = make_tile_grid(op, ann.tile_outer);
  const std::vector<Expr>& extent = grid.extent;
  const std::vector<Expr>& base = grid.base;
  std::vector<Var> p(n);
  std::vector<Expr> point(n);
  for (size_t a = 0; a < n; ++a) {
    p[a] = ir::var(op.axes[a].var->name + "_p", 0, ann.tile_outer[a] - 1);
    point[a] = base[a] + p[a];
  }
  // Reduce axes: all but the last run serially in full; the last is split into vectors + tail.
  std::vector<Var> rv(m);
  std::vector<Expr> rval(m);
  for (size_t r = 0; r + 1 < m; ++r) {
    rv[r] = ir::var(op.reduce_axes[r].var->name, 0, op.reduce_axes[r].var->hi);
    rval[r] = rv[r];
  }
  const Expr klast = op.reduce_axes[m - 1].extent;
  // Independent vector accumulators in the main loop: one accumulator would make every step wait
  // for the previous combine (4 cycles of FMA/add latency per vector); four hide it.
  const int64_t num_acc = !klast->is_const_int() || klast->int_value >= 8 * vl ? 4 : 1;
  const int64_t step = num_acc * vl;
  Var ko = ir::var("ko", 0, ir::kNoUpperBound), lane = ir::var("lane", 0, vl - 1);
  Var u = ir::var("u", 0, num_acc - 1);
  Var k1 = ir::var("k1", 0, ir::kNoUpperBound), kt = ir::var("kt", 0, ir::kNoUpperBound);
  const Expr kblocks = ir::floordiv(klast, ir::int_imm(step));
  const Expr kvecs = ir::floordiv(klast, ir::int_imm(vl));
  const Expr kmain = kvecs * ir::int_imm(vl);

  ir::Buffer vacc = ir::make_buffer("vacc", sb.dtype, {ir::int_imm(step)}, ir::MemScope::kRegister);
  const Expr identity = ir::reduce_identity(op.reduce, sb.dtype);
  auto lanes = [&](Stmt body) {
    return loop::make_for(lane, ir::int_imm(0), ir::int_imm(vl),
                          vl > 1 ? ForKind::kVectorized : ForKind::kSerial, body);
  };
  auto accumulate_at = [&](const Expr& slot, const Expr& k) {
    rval[m - 1] = k;
    return loop::make_store(
        vacc, slot, ir::reduce_combine(op.reduce, ir::load(vacc, slot), pw.value(point, rval)));
  };
  const Expr uslot = u * ir::int_imm(vl) + lane;
  auto per_slot = [&](Stmt body) {
    return loop::make_for(u, ir::int_imm(0), ir::int_imm(num_acc), ForKind::kUnrolled,
                          lanes(std::move(body)));
  };
  auto block_at = [&](const Expr& b) {
    return per_slot(accumulate_at(uslot, b * ir::int_imm(step) + u * ir::int_imm(vl) + lane));
  };
  // A long float sum keeps chunk partials (split_reduction.h): every kSumChunk values the
  // accumulators are added into `vsum` and restart, so no lane adds up more than a chunk's share.
  const bool chunked = num_acc > 1 && is_long_float_sum(op, sb.dtype);
  ir::Buffer vsum = ir::make_buffer("vsum", sb.dtype, {ir::int_imm(step)}, ir::MemScope::kRegister);
  Stmt init = per_slot(loop::make_store(vacc, uslot, identity));
  Stmt main_loop;
  if (!chunked) {
    main_loop = loop::make_for(ko, ir::int_imm(0), kblocks, ForKind::kSerial, block_at(ko));
  } else {
    init = loop::make_seq({init, per_slot(loop::make_store(vsum, uslot, identity))});
    const int64_t per = std::max<int64_t>(1, kSumChunk / step);  // blocks per chunk
    // Whole chunks (a constant trip count inside), each flushed; the blocks left over stay in
    // vacc, which the fold adds to vsum.
    Var kc = ir::var("kc", 0, ir::kNoUpperBound), kb = ir::var("kb", 0, per - 1);
    const Expr chunks = ir::floordiv(kblocks, ir::int_imm(per));
    Stmt chunk = loop::make_for(kb, ir::int_imm(0), ir::int_imm(per), ForKind::kSerial,
                                block_at(kc * ir::int_imm(per) + kb));
    Stmt flush = per_slot(loop::make_seq(
        {loop::make_store(vsum, uslot, ir::load(vsum, uslot) + ir::load(vacc, uslot)),
         loop::make_store(vacc, uslot, identity)}));
    const Expr done_blocks = chunks * ir::int_imm(per);
    main_loop = loop::make_seq(
        {loop::make_for(kc, ir::int_imm(0), chunks, ForKind::kSerial,
                        loop::make_seq({chunk, flush})),
         loop::make_for(ko, done_blocks, kblocks - done_blocks, ForKind::kSerial, block_at(ko))});
  }
  // Whole vectors left after the blocks, then single elements, into accumulator 0.
  const Expr vec_start = num_acc > 1 ? kblocks * ir::int_imm(num_acc) : ir::int_imm(0);
  Stmt vec_tail = loop::make_for(k1, vec_start, kvecs - vec_start, ForKind::kSerial,
                                 lanes(accumulate_at(lane, k1 * ir::int_imm(vl) + lane)));
  Stmt tail =
      loop::make_for(kt, kmain, klast - kmain, ForKind::kSerial, accumulate_at(ir::int_imm(0), kt));
  Stmt accumulate =
      num_acc > 1 ? loop::make_seq({main_loop, vec_tail, tail}) : loop::make_seq({vec_tail, tail});
  for (size_t r = m - 1; r-- > 0;) {
    accumulate = loop::make_for(rv[r], ir::int_imm(0), op.reduce_axes[r].extent, ForKind::kSerial,
                                accumulate);
  }
  // Combine the accumulators into the first, then its lanes pairwise (a tree: log2(vl) dependent
  // steps instead of vl - 1).
  std::vector<Stmt> folds;
  if (chunked)
    folds.push_back(
        per_slot(loop::make_store(vacc, uslot, ir::load(vacc, uslot) + ir::load(vsum, uslot))));
  for (int64_t a = 1; a < num_acc; ++a) {
    Expr slot = ir::int_imm(a * vl) + lane;
    folds.push_back(lanes(loop::make_store(
        vacc, lane, ir::reduce_combine(op.reduce, ir::load(vacc, lane), ir::load(vacc, slot)))));
  }
  for (int64_t half = 1; half < vl; half *= 2) {
    for (int64_t l = 0; l + half < vl; l += 2 * half) {
      Expr dst = ir::int_imm(l), src = ir::int_imm(l + half);
      folds.push_back(loop::make_store(
          vacc, dst, ir::reduce_combine(op.reduce, ir::load(vacc, dst), ir::load(vacc, src))));
    }
  }
  Stmt fold = loop::make_seq(folds);
  Stmt write = pw.store_out(point, pw.finish(point, ir::load(vacc, ir::int_imm(0))));
  Stmt per_point = loop::make_allocate(vacc, loop::make_seq({init, accumulate, fold, write}));
  if (chunked) per_point = loop::make_allocate(vsum, per_point);
  for (size_t a = n; a-- > 0;) {
    Expr ext = ir::min(ir::int_imm(ann.tile_outer[a]), extent[a] - base[a]);
    per_point = loop::make_for(p[a], ir::int_imm(0), ext, ForKind::kSerial, per_point);
  }
  return loop::make_for(grid.tile, ir::int_imm(0), grid.total,
                        ann.parallel ? ForKind::kParallel : ForKind::kSerial, per_point);
}

PackedLayout pack_layout(const StageBody& sb, const StageAnnotation& ann, const ir::Tensor& t) {
  const int n = static_cast<int>(sb.op->axes.size());
  TESSERA_CHECK(ann.vector_axis >= 0 && ann.vector_axis < n &&
                static_cast<int>(ann.tile_reg.size()) == n)
      << "stage " << sb.op->name << ": packing needs a valid vector axis";
  PackedLayout layout;
  layout.dim = dim_indexed_by(sb.value, t.get(), sb.op->axes[ann.vector_axis].var);
  layout.panel = ann.tile_reg[ann.vector_axis];
  for (int a = 0; a < n && layout.dim < 0; ++a) {
    if (a == ann.vector_axis || ann.tile_reg[a] <= 1) continue;
    layout.dim = dim_indexed_by(sb.value, t.get(), sb.op->axes[a].var);
    layout.panel = ann.tile_reg[a];
  }
  if (layout.dim < 0) {  // nothing to align with: panels of the last dim
    layout.dim = t->ndim() - 1;
    layout.panel = ann.tile_reg[ann.vector_axis];
  }
  return layout;
}

Stmt lower_pack(const ir::Tensor& t, const PackedLayout& layout, const AccessLowering& al,
                int vector_width, bool parallel) {
  const int64_t panel = layout.panel;
  const int nd = t->ndim();
  TESSERA_CHECK(nd >= 1) << "cannot pack scalar " << t->name;
  const int dim = layout.dim < 0 ? nd - 1 : layout.dim;
  const ir::Buffer& src = al.buffer_of(t.get());
  const Expr split_extent = t->shape[dim];
  const std::vector<Expr> pshape = packed_shape(t->shape, panel, dim);
  Var p = tile_var("panel", pshape[0]);
  // One loop per dimension other than `dim`, in order (the packed buffer's middle dims).
  std::vector<Var> d;
  std::vector<Expr> d_extent;
  for (int k = 0; k < nd; ++k) {
    if (k == dim) continue;
    int64_t hi = t->shape[k]->is_const_int() ? t->shape[k]->int_value - 1 : ir::kNoUpperBound;
    d.push_back(ir::var("d" + std::to_string(k), 0, hi));
    d_extent.push_back(t->shape[k]);
  }
  auto copy_at = [&](const Expr& q, bool guarded) {
    Expr pos = p * ir::int_imm(panel) + q;
    std::vector<Expr> sidx;
    for (int k = 0, j = 0; k < nd; ++k) {
      sidx.push_back(k == dim ? (guarded ? ir::min(pos, split_extent - ir::int_imm(1)) : pos)
                              : Expr(d[j++]));
    }
    Expr v = ir::load(src, ir::flat_index(src, sidx));
    if (guarded) v = ir::select(ir::lt(pos, split_extent), v, ir::make_const(t->dtype, 0.0));
    std::vector<Expr> didx;
    didx.push_back(p);
    didx.insert(didx.end(), d.begin(), d.end());
    didx.push_back(q);
    return loop::make_store(layout.buffer, ir::flat_index(layout.buffer, didx), v);
  };
  Var q = ir::var("q", 0, panel - 1);
  Stmt full;
  if (vector_width > 1 && panel % vector_width == 0) {
    // Along the last dim these are plain vector loads; along another dim, gathers (the packed
    // side is contiguous either way).
    Var qu = ir::var("qu", 0, panel / vector_width - 1);
    Var ql = ir::var("ql", 0, vector_width - 1);
    full = loop::make_for(
        qu, ir::int_imm(0), ir::int_imm(panel / vector_width), ForKind::kSerial,
        loop::make_for(ql, ir::int_imm(0), ir::int_imm(vector_width), ForKind::kVectorized,
                       copy_at(qu * ir::int_imm(vector_width) + ql, false)));
  } else {
    full =
        loop::make_for(q, ir::int_imm(0), ir::int_imm(panel), ForKind::kSerial, copy_at(q, false));
  }
  Var qt = ir::var("qt", 0, panel - 1);
  Stmt partial =
      loop::make_for(qt, ir::int_imm(0), ir::int_imm(panel), ForKind::kSerial, copy_at(qt, true));
  Stmt body = loop::make_if(ir::le(p * ir::int_imm(panel) + ir::int_imm(panel), split_extent), full,
                            partial);
  for (size_t k = d.size(); k-- > 0;) {
    body = loop::make_for(d[k], ir::int_imm(0), d_extent[k], ForKind::kSerial, body);
  }
  return loop::make_for(p, ir::int_imm(0), pshape[0],
                        parallel ? ForKind::kParallel : ForKind::kSerial, body);
}

}  // namespace tessera::schedule
