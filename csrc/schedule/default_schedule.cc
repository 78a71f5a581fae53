#include "schedule/default_schedule.h"

#include <algorithm>
#include <limits>

#include "cost/hardware.h"
#include "ir/functor.h"
#include "ir/simplify.h"
#include "runtime/parallel.h"
#include "schedule/skewed_tiling.h"

namespace tessera::schedule {

using ir::Expr;
using ir::ExprKind;

namespace {

// Symbolic extents are planned for as if they were this large (a typical dynamic batch/seq).
constexpr int64_t kSymbolicGuess = 256;
// Inner reduce tiles of at least this many steps are long (a GEMM's K), shorter ones a window's
// width (a convolution's kw).
constexpr int64_t kLongInnerReduce = 16;
// Steps per unrolled group of a long and of a short inner reduction.
constexpr int64_t kLongReduceUnroll = 4;
constexpr int64_t kShortReduceUnroll = 2;
// Most vector accumulators a short-window tile may hold and still be unrolled: the unrolled
// steps' broadcasts, hoisted by LLVM, need the other registers (with 28 it spilled).
constexpr int64_t kShortUnrollMaxAccumulators = 16;
// Cache tile of both axes of a transposing copy: a 64 x 64 block of 4-byte elements touches
// 64 lines per gathered vector run, 16 KB in all, which stays in L1 while the other axis steps.
constexpr int64_t kTransposeBlock = 64;
// Rows of a band product's skewed register tile (one vector each): each row is its own stream
// of the row operand, and 8 keep the prefetchers on them (as choose_register_tile's limit).
constexpr int64_t kSkewRows = 8;
// Skewed register tiles per cache tile along the skew axis: consecutive tiles read overlapping
// windows of the band operand, which then come from L1.
constexpr int64_t kSkewTilesPerCacheTile = 8;

int64_t extent_of(const Expr& e) { return e->is_const_int() ? e->int_value : kSymbolicGuess; }

int64_t pow2_floor(int64_t x) {
  int64_t p = 1;
  while (p <= x / 2) p *= 2;  // p * 2 <= x without overflowing for x near 2^63
  return p;
}

// a * b, saturating at int64's maximum (extents are non-negative).
int64_t saturating_mul(int64_t a, int64_t b) {
  if (a == 0 || b == 0) return 0;
  return a > std::numeric_limits<int64_t>::max() / b ? std::numeric_limits<int64_t>::max() : a * b;
}

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// Largest multiple of `step` that is <= `limit` (at least `step`).
int64_t multiple_at_most(int64_t step, int64_t limit) {
  return std::max<int64_t>(step, limit / step * step);
}

// Does `e` advance by exactly one when `v` does?
bool unit_stride(const Expr& e, const ir::Var& v) {
  ir::VarMap next;
  next[v.get()] = v + ir::int_imm(1);
  Expr step = ir::simplify(ir::substitute(e, next) - e);
  return step->is_const_int() && step->int_value == 1;
}

// Does access `acc` depend on `v` only through its innermost index, one element per step?
bool walks_innermost_only(const Expr& acc, const ir::Var& v) {
  const size_t n = acc->operands.size();
  for (size_t d = 0; d + 1 < n; ++d) {
    if (ir::uses_var(acc->operands[d], v)) return false;
  }
  return n > 0 && unit_stride(acc->operands.back(), v);
}

}  // namespace

bool reads_innermost_along(const ir::Expr& body, const ir::Var& v) {
  bool found = false;
  ir::visit_expr(body, [&](const Expr& e) {
    if (found || e->kind != ExprKind::kAccess || e->operands.empty()) return;
    found = unit_stride(e->operands.back(), v);
  });
  return found;
}

Target Target::host() {
  Target t;
  cost::HardwareInfo hw = cost::host_hardware(false);
  t.vector_lanes = std::max(1, hw.vector_bits / 32);
  t.num_vector_registers = hw.num_vector_registers;
  t.num_threads = runtime::get_num_threads();
  if (int64_t l1 = cost::cache_size(hw, 1); l1 > 0) t.l1_bytes = l1;
  if (int64_t l2 = cost::cache_size(hw, 2); l2 > 0) t.l2_bytes = l2;
  return t;
}

AccessPattern analyze_access_pattern(const Stage& stage, const StagePlan& plan, int vector_axis) {
  AccessPattern ap;
  const ir::ComputeOpNode& op = *stage.op->op;
  const int n = static_cast<int>(op.axes.size());
  Expr body = inline_body(stage.op, plan.inlined);
  std::vector<Expr> accesses;
  ir::visit_expr(body, [&](const Expr& e) {
    if (e->kind == ExprKind::kAccess) accesses.push_back(e);
  });
  if (!op.reduce_axes.empty()) {
    const ir::Var& k = op.reduce_axes.back().var;
    ap.reduce_contiguous = reads_innermost_along(body, k);
    for (const Expr& acc : accesses) {
      if (ir::uses_var(acc, k) && !walks_innermost_only(acc, k)) ++ap.reduce_gathers;
    }
  }
  if (n == 0) return ap;
  ap.vector_axis = vector_axis >= 0 ? vector_axis : n - 1;
  const ir::Var& vvar = op.axes[ap.vector_axis].var;
  // Row axis: a spatial axis that none of the vector-dependent accesses use, so each vector
  // loaded along the vector axis is reused for every row of the register tile.
  for (int a = n - 1; a >= 0 && ap.row_axis < 0; --a) {
    if (a == ap.vector_axis || extent_of(op.axes[a].extent) <= 1) continue;
    bool reused = false, conflict = false;
    for (const Expr& acc : accesses) {
      bool uses_v = ir::uses_var(acc, vvar), uses_a = ir::uses_var(acc, op.axes[a].var);
      if (uses_v && uses_a) conflict = true;
      if (uses_v && !uses_a) reused = true;
    }
    if (reused && !conflict) ap.row_axis = a;
  }
  // Packing candidates: kernel inputs with one dimension indexed by exactly the vector axis and
  // reused across the row axis. Reads along the vector axis that are neither packable nor
  // innermost-dim walks are counted as gathers.
  for (const Expr& acc : accesses) {
    if (!ir::uses_var(acc, vvar)) continue;
    const ir::Tensor& t = acc->tensor;
    bool exact_dim = false, only_last = true;
    for (size_t d = 0; d < acc->operands.size(); ++d) {
      if (acc->operands[d].same_as(vvar)) exact_dim = true;
      if (d + 1 < acc->operands.size() && ir::uses_var(acc->operands[d], vvar)) only_last = false;
    }
    // Innermost-dim reads with a stride other than one (a stride-2 convolution) gather too.
    if (only_last && !unit_stride(acc->operands.back(), vvar)) only_last = false;
    const bool packable = ap.row_axis >= 0 && t->is_placeholder() && exact_dim &&
                          !ir::uses_var(acc, op.axes[ap.row_axis].var);
    if (packable) {
      if (std::find(ap.packable.begin(), ap.packable.end(), t->name) == ap.packable.end()) {
        ap.packable.push_back(t->name);
      }
    } else if (!only_last) {
      ++ap.gathers;
    }
  }
  return ap;
}

RegisterTile choose_register_tile(int64_t row_extent, int64_t vec_extent, const Target& target) {
  const int64_t vl = target.vector_lanes;
  RegisterTile best;
  double best_cost = 1e30;
  for (int64_t nv = 1; nv <= 4; ++nv) {
    if (nv > 1 && nv * vl > round_up(vec_extent, vl)) break;
    // At most 8 rows: each row of the broadcast operand is its own memory stream, and more
    // streams than that defeat the hardware prefetchers.
    for (int64_t mr = 1; mr <= 8; ++mr) {
      if (mr > 1 && mr > row_extent) break;
      // Registers: accumulators + one register per loaded vector + one broadcast.
      if (mr * nv + nv + 1 > target.num_vector_registers) continue;
      // Cycles per k step: two FMA pipes, two load ports, the FMA latency (4 cycles) that
      // mr*nv independent accumulators must cover, plus one cycle of loop overhead.
      double cycles = std::max({mr * nv / 2.0, (mr + nv) / 2.0, 4.0}) + 1.0;
      double fast_cost = cycles / static_cast<double>(mr * nv * vl);
      // Tiles cut along rows keep vector code but accumulate in memory (about 3x slower);
      // tiles cut along the vector axis run scalar loops (about one cycle per point and k).
      double rows_frac = static_cast<double>(row_extent - row_extent % mr) / row_extent;
      double cols_frac = static_cast<double>(vec_extent - vec_extent % (nv * vl)) / vec_extent;
      double cost = cols_frac * (rows_frac * fast_cost + (1.0 - rows_frac) * 3.0 * fast_cost) +
                    (1.0 - cols_frac) * 1.0;
      // Ties go to the larger tile (more latency hiding), then to more vectors.
      cost -= 1e-9 * static_cast<double>(mr * nv * 4 + nv);
      if (cost < best_cost) {
        best_cost = cost;
        best = RegisterTile{mr, nv, cost};
      }
    }
  }
  return best;
}

namespace {

// The vector axis for a register-blocked reduction: the output's innermost axis unless another
// spatial axis makes a clearly cheaper register tile. Conv2d in NCHW is the case that matters:
// on 14x14 and 7x7 images the innermost axis (w) is shorter than a vector, while c_out is long,
// and its weight reads become contiguous once the weight is packed along c_out.
struct VectorChoice {
  AccessPattern ap;
  RegisterTile rt;
};

// `innermost` is the analysis for the output's innermost axis (the caller has it already).
VectorChoice choose_vector_axis(const Stage& stage, const StagePlan& plan, const Target& target,
                                const AccessPattern& innermost) {
  const ir::ComputeOpNode& op = *stage.op->op;
  const int n = static_cast<int>(op.axes.size());
  auto evaluate = [&](int axis) {
    VectorChoice c;
    c.ap = axis == innermost.vector_axis ? innermost : analyze_access_pattern(stage, plan, axis);
    if (c.ap.row_axis < 0) return c;
    c.rt = choose_register_tile(extent_of(op.axes[c.ap.row_axis].extent),
                                extent_of(op.axes[c.ap.vector_axis].extent), target);
    // A gather costs about a cycle per lane.
    c.rt.cost *= 1.0 + c.ap.gathers;
    return c;
  };
  VectorChoice best = evaluate(n - 1);
  int64_t reduce_points = 1;
  for (const ir::IterVar& r : op.reduce_axes)
    reduce_points = saturating_mul(reduce_points, extent_of(r.extent));
  // Another axis writes its results with scatters (once per output point): only worth it when
  // the reduction is long.
  if (reduce_points < 64) return best;
  for (int a = n - 2; a >= 0; --a) {
    if (extent_of(op.axes[a].extent) < target.vector_lanes) continue;
    VectorChoice c = evaluate(a);
    if (c.ap.row_axis < 0 || c.ap.gathers > 0) continue;
    if (best.ap.row_axis < 0 || c.rt.cost < 0.8 * best.rt.cost) best = c;
  }
  return best;
}

}  // namespace

namespace {

// A transposing copy (an injective stage gathering along its vector axis from an input whose
// innermost dim another axis walks, a row-major [n, k] written as [k, n]): both axes are cut
// into kTransposeBlock tiles, that axis innermost, so the lines one tile touches are read again
// from L1 at its next steps instead of from L2 after the whole row. Where both axes hold a
// whole vector, the register tile is one vector along each: lanes x lanes elements, which the
// CPU code generator transposes in registers (loop/transpose_tiles.h) instead of gathering.
// The axis of a transposing copy's stage that walks its input's innermost dim (not the vector
// axis of `ann`), or -1 when the stage is not one.
int transposed_axis(const Stage& stage, const StagePlan& plan, const AccessPattern& ap,
                    const StageAnnotation& ann) {
  const ir::ComputeOpNode& op = *stage.op->op;
  const int v = ann.vector_axis;
  if (ap.gathers == 0 || v < 0) return -1;
  const Expr body = inline_body(stage.op, plan.inlined);
  for (int a = static_cast<int>(op.axes.size()) - 1; a >= 0; --a) {
    if (a != v && extent_of(op.axes[a].extent) > 1 && reads_innermost_along(body, op.axes[a].var)) {
      return a;
    }
  }
  return -1;
}

void block_transposing_copy(const Stage& stage, const StagePlan& plan, const AccessPattern& ap,
                            StageAnnotation* ann) {
  const ir::ComputeOpNode& op = *stage.op->op;
  const int n = static_cast<int>(op.axes.size());
  const int v = ann->vector_axis;
  const int a = transposed_axis(stage, plan, ap, *ann);
  if (a < 0) return;
  const int64_t lanes = ann->vector_width;
  if (op.reduce_axes.empty() && extent_of(op.axes[a].extent) >= lanes &&
      extent_of(op.axes[v].extent) >= lanes) {
    std::fill(ann->tile_reg.begin(), ann->tile_reg.end(), 1);
    ann->tile_reg[a] = lanes;
    ann->tile_reg[v] = lanes;
  }
  ann->tile_outer[a] = std::min(round_up(extent_of(op.axes[a].extent), ann->tile_reg[a]),
                                round_up(kTransposeBlock, ann->tile_reg[a]));
  ann->tile_outer[v] = std::min(ann->tile_outer[v], round_up(kTransposeBlock, ann->tile_reg[v]));
  ann->s1_order.clear();
  for (int x = 0; x < n; ++x) {
    if (x != a) ann->s1_order.push_back(x);
  }
  ann->s1_order.push_back(a);
}

// A band product (skewed_tiling.h), vectorised along ann's vector axis: kSkewRows rows along the
// skew axis share each vector of the band's reads. The cache tiles walk the skew axis innermost.
// False (ann untouched) when the stage is not one.
bool skew_band_product(const Stage& stage, const StagePlan& plan, StageAnnotation* ann) {
  const ir::ComputeOpNode& op = *stage.op->op;
  const int v = ann->vector_axis;
  const int n = static_cast<int>(op.axes.size());
  if (op.reduce_axes.empty() || extent_of(op.axes[v].extent) < ann->vector_width) return false;
  const int s = find_skew_axis(op, inline_body(stage.op, plan.inlined), stage.op->dtype, v);
  if (s < 0) return false;
  const int64_t rows = std::min(kSkewRows, extent_of(op.axes[s].extent));
  // Two vectors per window column where the window holds them: twice the independent
  // accumulators per row operand broadcast.
  const int64_t window = rows - 1 + extent_of(op.axes[v].extent);
  const int64_t vectors = window >= 2 * ann->vector_width ? 2 : 1;
  ann->skew_axis = s;
  ann->tile_reg[v] = ann->tile_outer[v] = vectors * ann->vector_width;
  ann->tile_reg[s] = rows;
  ann->tile_outer[s] =
      std::min(round_up(extent_of(op.axes[s].extent), rows), rows * kSkewTilesPerCacheTile);
  ann->s1_order.clear();
  for (int a = 0; a < n; ++a) {
    if (a != s) ann->s1_order.push_back(a);
  }
  ann->s1_order.push_back(s);
  unroll_inner_reduce(*ann);
  ann->prefetch = false;  // the skewed nest has no hints
  return true;
}

}  // namespace

bool is_transposing_copy(const Stage& stage, const StagePlan& plan, const StageAnnotation& rules) {
  return stage.op->op->reduce_axes.empty() && rules.sketch == Sketch::kMultiLevelTiling &&
         transposed_axis(stage, plan, analyze_access_pattern(stage, plan), rules) >= 0;
}

StageAnnotation default_stage_annotation(const Stage& stage, const StagePlan& plan,
                                         const Target& target) {
  const ir::ComputeOpNode& op = *stage.op->op;
  const int n = static_cast<int>(op.axes.size());
  const int m = static_cast<int>(op.reduce_axes.size());
  AccessPattern ap = analyze_access_pattern(stage, plan);
  StageAnnotation ann;
  ann.op = stage.op->name;
  ann.tile_outer.assign(n, 1);
  ann.tile_reg.assign(n, 1);
  ann.tile_reduce.assign(m, 1);
  int64_t points = 1;
  for (int a = 0; a < n; ++a) points = saturating_mul(points, extent_of(op.axes[a].extent));
  int64_t work = points;
  for (int r = 0; r < m; ++r) work = saturating_mul(work, extent_of(op.reduce_axes[r].extent));
  ann.parallel = work >= 32 * 1024;

  // Row reductions (softmax, norms, sums over the innermost dim): cross-lane, unless some read
  // would gather along the reduction (a band product reading B[k, m + w]: its rows run along w,
  // which the vector fallback below puts on the lanes instead).
  const int64_t klast = m > 0 ? extent_of(op.reduce_axes[m - 1].extent) : 0;
  if (m > 0 && ap.row_axis < 0 && ap.reduce_contiguous && ap.reduce_gathers == 0 &&
      klast >= target.vector_lanes) {
    ann.sketch = Sketch::kCrossLaneReduction;
    ann.vector_width = target.vector_lanes;
    ann.vector_axis = -1;
    for (int r = 0; r < m; ++r) ann.tile_reduce[r] = extent_of(op.reduce_axes[r].extent);
    return ann;
  }
  for (int r = 0; r < m; ++r)
    ann.tile_reduce[r] = std::max<int64_t>(1, extent_of(op.reduce_axes[r].extent));

  auto lanes_for = [&](int axis) {
    const int64_t ext = extent_of(op.axes[axis].extent);
    return std::min<int64_t>(target.vector_lanes, pow2_floor(std::max<int64_t>(ext, 1)));
  };
  if (m > 0 && n > 0) {
    VectorChoice vc = choose_vector_axis(stage, plan, target, ap);
    const int vaxis = vc.ap.vector_axis;
    const int64_t vl = lanes_for(vaxis);
    if (vl >= 4 && vc.ap.row_axis >= 0) {
      // Register-blocked SSRSRS for reductions with reuse (matmul, batch matmul, conv).
      const int row = vc.ap.row_axis;
      const int64_t rext = extent_of(op.axes[row].extent);
      const int64_t vext = extent_of(op.axes[vaxis].extent);
      const RegisterTile& rt = vc.rt;
      const int64_t panel = rt.vectors * vl;
      ann.vector_axis = vaxis;
      ann.vector_width = static_cast<int>(vl);
      ann.tile_reg[row] = rt.rows;
      ann.tile_reg[vaxis] = panel;
      // Inner reduce tile: the whole (constant) reduction when the reused operand's panel over
      // all of it fits in half of L2: the panel streams from L2 behind the prefetchers, and each
      // split of the reduction only sends the accumulators through memory once more. Otherwise
      // a kc x panel slice that stays in L1.
      const Expr& kext = op.reduce_axes[m - 1].extent;
      const int64_t kc_limit = std::max<int64_t>(16, target.l1_bytes * 3 / 4 / (panel * 4));
      const bool whole_panel_in_l2 =
          kext->is_const_int() && saturating_mul(kext->int_value, panel * 4) <= target.l2_bytes / 2;
      ann.tile_reduce[m - 1] =
          whole_panel_in_l2 ? kext->int_value : std::min(extent_of(kext), pow2_floor(kc_limit));
      // Cache tile: a few panels wide, enough rows that the A block stays in L2.
      ann.tile_outer[vaxis] = std::min(round_up(vext, panel), multiple_at_most(panel, 256));
      ann.tile_outer[row] = std::min(round_up(rext, rt.rows), multiple_at_most(rt.rows, 96));
      // Keep at least ~4 tasks per thread for load balance.
      auto tasks = [&]() {
        int64_t t = 1;
        for (int a = 0; a < n; ++a)
          t *= (extent_of(op.axes[a].extent) + ann.tile_outer[a] - 1) / ann.tile_outer[a];
        return t;
      };
      while (tasks() < 4 * target.num_threads && ann.tile_outer[row] > rt.rows) {
        ann.tile_outer[row] = multiple_at_most(rt.rows, ann.tile_outer[row] / 2);
      }
      while (tasks() < 4 * target.num_threads && ann.tile_outer[vaxis] > panel) {
        ann.tile_outer[vaxis] = multiple_at_most(panel, ann.tile_outer[vaxis] / 2);
      }
      // S1: the vector axis outside the row axis, so one panel is reused by all row tiles.
      // Behind a short reduction into an output larger than L2 the write-back dominates
      // instead, and the output is written fastest in its own order (register tiles along the
      // contiguous axis).
      int64_t reduce_points = 1;
      for (int r = 0; r < m; ++r)
        reduce_points = saturating_mul(reduce_points, extent_of(op.reduce_axes[r].extent));
      const bool writes_dominate =
          reduce_points < 128 && saturating_mul(points, 4) > target.l2_bytes;
      for (int a = 0; a < n; ++a) ann.s1_order.push_back(a);
      if (vaxis > row && !writes_dominate) std::swap(ann.s1_order[row], ann.s1_order[vaxis]);
      if (rext * vext >= 64 * 64 || vaxis != n - 1) ann.pack = vc.ap.packable;
      // A tile cut by the end of a symbolic extent: padded locally rather than split into edge
      // loops (one tile's code serves every size; benchmarks/dynamic.py --case padding).
      if (!op.axes[row].extent->is_const_int() || !op.axes[vaxis].extent->is_const_int()) {
        ann.edge = EdgeMode::kLocalPad;
      }
      unroll_inner_reduce(ann);
      return ann;
    }
  }

  const int64_t vext = n > 0 ? extent_of(op.axes[n - 1].extent) : 1;
  const int64_t vl = n > 0 ? lanes_for(n - 1) : 1;
  if (n > 0 && vl >= 4) {
    // Injective (or reduction without reuse): a few vectors per step along the innermost axis.
    ann.vector_axis = n - 1;
    ann.vector_width = static_cast<int>(vl);
    if (skew_band_product(stage, plan, &ann)) return ann;
    const int64_t nv = std::max<int64_t>(1, std::min<int64_t>(4, vext / vl));
    ann.tile_reg[n - 1] = nv * vl;
    ann.tile_outer[n - 1] = std::min(round_up(vext, nv * vl), multiple_at_most(nv * vl, 1024));
    block_transposing_copy(stage, plan, ap, &ann);
  } else if (n > 0) {
    ann.tile_outer[n - 1] = std::min<int64_t>(vext, 64);
  }
  return ann;
}

void unroll_inner_reduce(StageAnnotation& ann) {
  const bool blocked = ann.sketch == Sketch::kMultiLevelTiling && ann.vector_axis >= 0;
  const int64_t inner = ann.tile_reduce.empty() ? 0 : ann.tile_reduce.back();
  int64_t accumulators = 1;
  for (int64_t r : ann.tile_reg) accumulators *= r;
  accumulators /= std::max(ann.vector_width, 1);
  if (!blocked || inner < 2) {
    ann.reduce_unroll = 1;
  } else if (inner >= kLongInnerReduce) {
    ann.reduce_unroll = kLongReduceUnroll;
  } else {
    ann.reduce_unroll = accumulators <= kShortUnrollMaxAccumulators ? kShortReduceUnroll : 1;
  }
  // Hint the next register tiles' operands (tile_prefetch.h) at every unrolled group. In a
  // model every layer's weight is read once per call from beyond L2, and without the hints the
  // register tile that first reads each part of it waits on that stream.
  ann.prefetch = ann.reduce_unroll > 1;
}

KernelSchedule default_schedule(const StagePlan& plan, const Target& target) {
  KernelSchedule ks;
  ks.tuner = "default";
  ks.plan = plan.choices;
  for (const Stage& s : plan.stages) ks.stages.push_back(default_stage_annotation(s, plan, target));
  return ks;
}

}  // namespace tessera::schedule
