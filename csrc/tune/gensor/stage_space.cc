#include "tune/gensor/stage_space.h"

#include <algorithm>
#include <set>

#include "ir/functor.h"
#include "schedule/lower_access.h"
#include "tune/common.h"
#include "util/check.h"

namespace tessera::tune::gensor {

namespace {

// Powers of two below the extent, then the extent itself ("the whole axis").
std::vector<int64_t> pow2_ladder(int64_t extent) {
  std::vector<int64_t> v;
  for (int64_t p = 1; p < extent; p *= 2) v.push_back(p);
  v.push_back(std::max<int64_t>(1, extent));
  return v;
}

// Register tile along a non-vector axis: every row count up to 16 (6x2, 5x3... are the shapes
// that fill a 32-register file; powers of two alone would miss them).
std::vector<int64_t> reg_row_ladder(int64_t extent) {
  std::vector<int64_t> v;
  for (int64_t r = 1; r <= std::min<int64_t>(16, extent); ++r) v.push_back(r);
  return v;
}

// Register tile along the vector axis: a vector width (1..lanes) or a few full vectors, plus the
// extent itself when small, so that a 7- or 28-wide axis can run without a scalar remainder.
std::vector<int64_t> reg_vector_ladder(int64_t extent, int lanes) {
  std::vector<int64_t> v;
  for (int64_t w = 1; w <= lanes; w *= 2) {
    if (w <= extent) v.push_back(w);
  }
  for (int64_t k = 2; k <= 4; ++k) {
    if (k * lanes <= extent) v.push_back(k * lanes);
  }
  if (extent <= 4 * lanes && extent > 1) v.push_back(extent);
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

// Tensors read in the value operands of a select (a pad inlined into the body).
std::set<const ir::TensorNode*> read_under_select(const ir::Expr& body) {
  std::set<const ir::TensorNode*> out;
  ir::visit_expr(body, [&](const ir::Expr& x) {
    if (x->kind != ir::ExprKind::kSelect) return;
    for (size_t i = 1; i < x->operands.size(); ++i) {
      ir::visit_expr(x->operands[i], [&](const ir::Expr& y) {
        if (y->kind == ir::ExprKind::kAccess) out.insert(y->tensor.get());
      });
    }
  });
  return out;
}

double count_ops(const ir::Expr& e) {
  double n = 0;
  ir::visit_expr(e, [&](const ir::Expr& x) {
    switch (x->kind) {
      case ir::ExprKind::kIntImm:
      case ir::ExprKind::kFloatImm:
      case ir::ExprKind::kVar:
      case ir::ExprKind::kAccess:
      case ir::ExprKind::kLoad:
        break;
      case ir::ExprKind::kCall:
        n += 8;  // exp/tanh/erf... are polynomial evaluations
        break;
      default:
        if (!ir::is_int(x->dtype) && x->dtype != ir::DType::kBool) n += 1;
    }
  });
  return std::max(1.0, n);
}

}  // namespace

const char* level_name(int level) {
  switch (level) {
    case kL2:
      return "L2";
    case kL1:
      return "L1";
    case kReg:
      return "reg";
  }
  return "?";
}

int vector_width_for(int64_t tile, int lanes) {
  int w = 1;
  while (w * 2 <= lanes && tile % (w * 2) == 0) w *= 2;
  return w;
}

double StageSpace::work() const {
  double w = 1;
  for (int64_t e : extents) w *= static_cast<double>(e);
  return w;
}

StageSpace make_stage_space(const schedule::StagePlan& plan, int index,
                            const schedule::Target& target) {
  TESSERA_CHECK(index >= 0 && index < static_cast<int>(plan.stages.size())) << "no stage " << index;
  const schedule::Stage& stage = plan.stages[index];
  const ir::ComputeOpNode& op = *stage.op->op;
  StageSpace sp;
  sp.stage_index = index;
  sp.op_name = stage.op->name;
  sp.base = schedule::default_stage_annotation(stage, plan, target);
  sp.num_spatial = static_cast<int>(op.axes.size());
  sp.num_reduce = static_cast<int>(op.reduce_axes.size());
  sp.lanes = std::max(1, target.vector_lanes);
  sp.num_vector_registers = target.num_vector_registers;
  for (const ir::IterVar& iv : op.axes) {
    sp.names.push_back(iv.var->name);
    sp.extents.push_back(iv.extent->is_const_int() ? iv.extent->int_value : kSymbolicSizeGuess);
  }
  for (const ir::IterVar& iv : op.reduce_axes) {
    sp.names.push_back(iv.var->name);
    sp.extents.push_back(iv.extent->is_const_int() ? iv.extent->int_value : kSymbolicSizeGuess);
  }
  for (int64_t& e : sp.extents) e = std::max<int64_t>(1, e);
  sp.vector_axis = sp.base.sketch == schedule::Sketch::kMultiLevelTiling ? sp.base.vector_axis : -1;

  // Access regions of the body with producers inlined, plus the epilogue's reads.
  ir::Expr body = schedule::inline_body(stage.op, plan.inlined);
  const ir::Expr epilogue =
      schedule::epilogue_over_op_axes(stage, plan.inlined, ir::float_imm(0.0));
  std::vector<ir::Expr> op_point;
  for (const ir::IterVar& iv : op.axes) op_point.push_back(iv.var);
  sp.regions = std::make_shared<cost::AccessRegions>(cost::AccessRegions::for_compute(
      op, body, stage.written().get(), epilogue, kSymbolicSizeGuess,
      schedule::written_point(stage, op_point)));
  sp.body_ops = count_ops(body) + (epilogue.defined() ? count_ops(epilogue) : 0);

  const int nt = static_cast<int>(sp.regions->tensors().size());
  const std::set<const ir::TensorNode*> selected = read_under_select(body);
  sp.guarded.assign(nt, false);
  for (int t = 0; t < nt; ++t) sp.guarded[t] = selected.count(sp.regions->tensors()[t].tensor) > 0;

  // Vector behaviour of each tensor: compare the region of a unit tile with the region of a tile
  // two wide along the vector iterator.
  sp.vector_dependent.assign(nt, false);
  sp.vector_contiguous.assign(nt, false);
  if (sp.vector_axis >= 0) {
    std::vector<int64_t> unit(sp.num_iters(), 1), two(sp.num_iters(), 1);
    two[sp.vector_axis] = std::min<int64_t>(2, sp.extents[sp.vector_axis]);
    for (int t = 0; t < nt; ++t) {
      std::vector<int64_t> a = sp.regions->region_shape(t, unit),
                           b = sp.regions->region_shape(t, two);
      bool dep = a != b;
      sp.vector_dependent[t] = dep;
      if (dep && !b.empty()) {
        bool contiguous = b.back() == a.back() + 1;
        for (size_t d = 0; d + 1 < b.size(); ++d) contiguous = contiguous && a[d] == b[d];
        sp.vector_contiguous[t] = contiguous;
      }
    }
  }

  if (sp.vector_axis >= 0 && sp.num_reduce > 0) {
    for (int t = 0; t < nt; ++t) {
      const cost::TensorAccesses& ta = sp.regions->tensors()[t];
      if (ta.is_output || ta.epilogue || sp.vector_dependent[t] || !ta.tensor ||
          !ta.tensor->is_placeholder()) {
        continue;
      }
      for (int a = 0; a < sp.num_spatial; ++a) {
        if (a == sp.vector_axis || schedule::dim_indexed_by(body, ta.tensor, op.axes[a].var) < 0)
          continue;
        sp.row_packable.push_back({ta.name, a});
        break;
      }
    }
  }

  const int n = sp.num_spatial, d = sp.num_iters();
  for (auto& l : sp.ladder) l.assign(d, {});
  if (sp.cross_lane()) {
    // Per output point the whole reduction runs vectorised: only the points per task are tiled.
    for (int a = 0; a < n; ++a) sp.ladder[kL2][a] = pow2_ladder(sp.extents[a]);
  } else {
    for (int a = 0; a < n; ++a) {
      sp.ladder[kL2][a] = pow2_ladder(sp.extents[a]);
      sp.ladder[kL1][a] = pow2_ladder(sp.extents[a]);
      sp.ladder[kReg][a] = a == sp.vector_axis ? reg_vector_ladder(sp.extents[a], sp.lanes)
                                               : reg_row_ladder(sp.extents[a]);
    }
    // The sketch splits a reduction once (R0 outside the register tiles, R1 inside), so the
    // reduce tile is chosen with the L2 tile and the L1 level inherits it.
    for (int r = n; r < d; ++r) sp.ladder[kL2][r] = pow2_ladder(sp.extents[r]);
  }
  return sp;
}

}  // namespace tessera::tune::gensor
