#include "schedule/gpu/tiled_reduction.h"

#include <algorithm>
#include <set>
#include <sstream>

#include "ir/functor.h"
#include "ir/linear_form.h"
#include "schedule/gpu/kernel_frame.h"
#include "schedule/gpu/shared_staging.h"
#include "schedule/lower_access.h"
#include "util/check.h"

namespace tessera::schedule::gpu {

using ir::Expr;
using ir::Var;
using loop::ForKind;
using loop::Stmt;

namespace {

// Largest steps of the default configuration: threads per axis, register points per axis, and
// reduce values per shared-memory step.
constexpr int64_t kDefaultAxisThreads = 16;
constexpr int64_t kDefaultAxisPoints = 4;
constexpr int64_t kDefaultStepValues = 32;
// Reduce axes at most this long are staged whole (conv kernel windows).
constexpr int64_t kWholeReduceAxis = 7;
// Most values of one reduce axis unrolled per step.
constexpr int64_t kMaxUnroll = 4;
// What an extent with no constant value counts as when sizing tiles.
constexpr int64_t kAssumedSymbolicExtent = 1024;

Expr ceil_div(const Expr& n, int64_t d) {
  return ir::floordiv(n + ir::int_imm(d - 1), ir::int_imm(d));
}

int64_t pow2_floor(int64_t v) {
  int64_t p = 1;
  while (p * 2 <= v) p *= 2;
  return p;
}

int64_t pow2_ceil(int64_t v) {
  int64_t p = 1;
  while (p < v) p *= 2;
  return p;
}

int64_t extent_hint(const Expr& e) {
  return e->is_const_int() ? e->int_value : kAssumedSymbolicExtent;
}

// Whether `n` is a constant multiple of `d` (then no tail guard is needed).
bool divides(const Expr& n, int64_t d) { return n->is_const_int() && n->int_value % d == 0; }

// Row-major coordinates of `flat` in a box of `extents`.
std::vector<Expr> unflatten(const Expr& flat, const std::vector<Expr>& extents) {
  std::vector<Expr> coords(extents.size());
  Expr rest = flat;
  for (size_t d = extents.size(); d-- > 0;) {
    coords[d] = d == 0 ? rest : ir::floormod(rest, extents[d]);
    rest = ir::floordiv(rest, extents[d]);
  }
  return coords;
}

std::string list_text(const std::vector<int64_t>& v) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
  os << "]";
  return os.str();
}

const ir::ComputeOpNode& reduction_of(const StagePlan& plan) { return *plan.stages[0].op->op; }

int64_t block_tile(const GpuTileConfig& c, size_t a) {
  return c.vthread[a] * c.thread[a] * c.inner[a];
}

// Distinct tensor accesses of `body` (same tensor and identical indices count once).
std::vector<Expr> distinct_accesses(const Expr& body) {
  std::vector<Expr> found;
  ir::visit_expr(body, [&](const Expr& e) {
    if (e->kind != ir::ExprKind::kAccess) return;
    for (const Expr& f : found) {
      if (f->tensor.get() == e->tensor.get() && ir::expr_equal(f, e)) return;
    }
    found.push_back(e);
  });
  return found;
}

// Whether the access leaves out some spatial axis of the op longer than one (its data is shared
// by the threads along that axis), which is what staging it pays for. A kept dimension of
// extent 1 shares nothing.
bool reused(const Expr& access, const ir::ComputeOpNode& op) {
  for (const ir::IterVar& a : op.axes) {
    if (!a.extent->is_const_int(1) && !ir::uses_var(access, a.var)) return true;
  }
  return false;
}

// Tiles of the op's variables within one block and reduce step: spatial axis a starts at
// block_coord[a] * block tile, reduce axis b at step[b] * stage[b].
VarTiles var_tiles(const ir::ComputeOpNode& op, const GpuTileConfig& c,
                   const std::vector<Expr>& block_coord, const std::vector<Expr>& step) {
  VarTiles tiles;
  for (size_t a = 0; a < op.axes.size(); ++a) {
    const int64_t b = block_tile(c, a);
    tiles[op.axes[a].var.get()] = VarTile{block_coord[a] * ir::int_imm(b), b};
  }
  for (size_t r = 0; r < op.reduce_axes.size(); ++r) {
    tiles[op.reduce_axes[r].var.get()] = VarTile{step[r] * ir::int_imm(c.stage[r]), c.stage[r]};
  }
  return tiles;
}

// The accesses of `body` that are staged in shared memory: affine in the tiled variables and
// reused across threads.
std::vector<StagedAccess> staged_accesses(const Expr& body, const ir::ComputeOpNode& op,
                                          const VarTiles& tiles) {
  std::vector<StagedAccess> staged;
  for (const Expr& access : distinct_accesses(body)) {
    if (!reused(access, op)) continue;
    const std::string name = access->tensor->name + "_shared" + std::to_string(staged.size());
    if (std::optional<StagedAccess> s = stage_region(access, tiles, name)) staged.push_back(*s);
  }
  return staged;
}

int64_t shared_bytes(const std::vector<StagedAccess>& staged) {
  int64_t bytes = 0;
  for (const StagedAccess& s : staged) {
    bytes += shared_elements(s) * ir::dtype_bytes(s.shared->dtype);
  }
  return bytes;
}

// Shared bytes of the plan's staged tiles under `c` (block and step bases do not matter).
int64_t shared_bytes_of(const StagePlan& plan, const GpuTileConfig& c) {
  const ir::ComputeOpNode& op = reduction_of(plan);
  const std::vector<Expr> zeros_s(op.axes.size(), ir::int_imm(0));
  const std::vector<Expr> zeros_r(op.reduce_axes.size(), ir::int_imm(0));
  const Expr body = inline_body(plan.stages[0].op, plan.inlined);
  return shared_bytes(staged_accesses(body, op, var_tiles(op, c, zeros_s, zeros_r)));
}

void check_config(const ir::ComputeOpNode& op, const GpuTileConfig& c) {
  const size_t n = op.axes.size(), m = op.reduce_axes.size();
  TESSERA_CHECK(c.vthread.size() == n && c.thread.size() == n && c.inner.size() == n)
      << "GPU tiled schedule: " << op.name << " has " << n << " spatial axes, config " << c.text();
  TESSERA_CHECK(c.stage.size() == m && c.unroll.size() == m)
      << "GPU tiled schedule: " << op.name << " has " << m << " reduce axes, config " << c.text();
  for (size_t a = 0; a < n; ++a) {
    TESSERA_CHECK(c.vthread[a] >= 1 && c.thread[a] >= 1 && c.inner[a] >= 1)
        << "GPU tiled schedule: tiles must be positive, config " << c.text();
  }
  for (size_t r = 0; r < m; ++r) {
    TESSERA_CHECK(c.stage[r] >= 1 && c.unroll[r] >= 1 && c.stage[r] % c.unroll[r] == 0)
        << "GPU tiled schedule: unroll must divide stage, config " << c.text();
  }
  TESSERA_CHECK(c.threads() <= kMaxBlockThreads)
      << "GPU tiled schedule: " << c.threads() << " threads per block (at most " << kMaxBlockThreads
      << ")";
}

// Builds `for v in [0, extent) kind: body(v)` for a list of extents, outermost first.
Stmt nest(const std::vector<Var>& vars, const std::vector<int64_t>& extents, ForKind kind,
          Stmt body) {
  for (size_t i = vars.size(); i-- > 0;) {
    body = loop::make_for(vars[i], ir::int_imm(0), ir::int_imm(extents[i]), kind, body);
  }
  return body;
}

// The loops and index expressions of one kernel, built once and shared by its parts.
class TiledLowering {
 public:
  TiledLowering(const StagePlan& plan, const GpuTileConfig& c, const std::string& name)
      : plan_(plan), op_(reduction_of(plan)), c_(c) {
    f_.name = name;
    bind_plan_args(plan, &f_, &al_);
    make_vars();
  }

  loop::LoweredFunc lower() {
    const Expr body = inline_body(plan_.stages[0].op, plan_.inlined);
    staged_ = staged_accesses(body, op_, var_tiles(op_, c_, block_coord_, step_));
    TESSERA_CHECK(shared_bytes(staged_) <= kMaxStaticSharedBytes)
        << "GPU tiled schedule: staged tiles take " << shared_bytes(staged_)
        << " bytes of shared memory (at most " << kMaxStaticSharedBytes << "), config "
        << c_.text();
    acc_ = ir::make_buffer(op_.name + "_acc", plan_.stages[0].op->dtype,
                           {ir::int_imm(register_points())}, ir::MemScope::kRegister);
    Stmt thread_body = loop::make_seq({init(), reduce_steps(body), write_back()});
    thread_body = loop::make_allocate(acc_, thread_body);
    for (const StagedAccess& s : staged_) thread_body = loop::make_allocate(s.shared, thread_body);
    return finish_launch(std::move(f_), plan_, bx_, blocks_, tx_, c_.threads(), thread_body);
  }

 private:
  void make_vars() {
    const size_t n = op_.axes.size(), m = op_.reduce_axes.size();
    std::vector<Expr> blocks_per_axis, threads_per_axis;
    blocks_ = ir::int_imm(1);
    for (size_t a = 0; a < n; ++a) {
      blocks_per_axis.push_back(ceil_div(op_.axes[a].extent, block_tile(c_, a)));
      blocks_ = blocks_ * blocks_per_axis.back();
      threads_per_axis.push_back(ir::int_imm(c_.thread[a]));
    }
    const int64_t blocks_hi = blocks_->is_const_int() ? blocks_->int_value - 1 : ir::kNoUpperBound;
    bx_ = ir::var("bx", 0, blocks_hi);
    tx_ = ir::var("tx", 0, c_.threads() - 1);
    block_coord_ = unflatten(bx_, blocks_per_axis);
    thread_coord_ = unflatten(tx_, threads_per_axis);
    for (size_t a = 0; a < n; ++a) {
      const std::string& an = op_.axes[a].var->name;
      vt_.push_back(ir::var(an + "_v", 0, c_.vthread[a] - 1));
      ii_.push_back(ir::var(an + "_i", 0, c_.inner[a] - 1));
    }
    for (size_t r = 0; r < m; ++r) {
      const std::string& rn = op_.reduce_axes[r].var->name;
      const Expr steps = ceil_div(op_.reduce_axes[r].extent, c_.stage[r]);
      steps_.push_back(steps);
      ko_.push_back(
          ir::var(rn + "_o", 0, steps->is_const_int() ? steps->int_value - 1 : ir::kNoUpperBound));
      ki_.push_back(ir::var(rn + "_k", 0, c_.stage[r] / c_.unroll[r] - 1));
      ku_.push_back(ir::var(rn + "_u", 0, c_.unroll[r] - 1));
      step_.push_back(ko_.back());
    }
  }

  int64_t register_points() const {
    int64_t p = 1;
    for (size_t a = 0; a < op_.axes.size(); ++a) p *= c_.vthread[a] * c_.inner[a];
    return p;
  }

  // Value of spatial axis a for this thread's register point (vt, ii).
  Expr spatial(size_t a) const {
    const int64_t ti = c_.thread[a] * c_.inner[a];
    return block_coord_[a] * ir::int_imm(block_tile(c_, a)) + Expr(vt_[a]) * ir::int_imm(ti) +
           thread_coord_[a] * ir::int_imm(c_.inner[a]) + ii_[a];
  }

  Expr reduce_value(size_t r) const {
    return Expr(ko_[r]) * ir::int_imm(c_.stage[r]) + Expr(ki_[r]) * ir::int_imm(c_.unroll[r]) +
           ku_[r];
  }

  // Index of the register point (vt, ii) in the accumulator tile.
  Expr acc_index() const {
    Expr q = ir::int_imm(0);
    for (size_t a = 0; a < op_.axes.size(); ++a) {
      q = q * ir::int_imm(c_.vthread[a] * c_.inner[a]) + Expr(vt_[a]) * ir::int_imm(c_.inner[a]) +
          ii_[a];
    }
    return q;
  }

  // `body` run for every register point: for vt..., ii... unrolled.
  Stmt over_register_tile(Stmt body) const {
    std::vector<Var> vars;
    std::vector<int64_t> extents;
    for (size_t a = 0; a < op_.axes.size(); ++a) {
      vars.push_back(vt_[a]);
      extents.push_back(c_.vthread[a]);
      vars.push_back(ii_[a]);
      extents.push_back(c_.inner[a]);
    }
    return nest(vars, extents, ForKind::kUnrolled, body);
  }

  // Whether every spatial axis is inside its extent (only axes with a tail are tested).
  Expr point_in_range() const {
    Expr cond = ir::bool_imm(true);
    for (size_t a = 0; a < op_.axes.size(); ++a) {
      if (divides(op_.axes[a].extent, block_tile(c_, a))) continue;
      cond = ir::logical_and(cond, ir::lt(spatial(a), op_.axes[a].extent));
    }
    return cond;
  }

  Stmt init() const {
    const Expr identity = ir::reduce_identity(op_.reduce, acc_->dtype);
    return over_register_tile(loop::make_store(acc_, acc_index(), identity));
  }

  ir::VarMap axis_values() const {
    ir::VarMap vm;
    for (size_t a = 0; a < op_.axes.size(); ++a) vm[op_.axes[a].var.get()] = spatial(a);
    for (size_t r = 0; r < op_.reduce_axes.size(); ++r) {
      vm[op_.reduce_axes[r].var.get()] = reduce_value(r);
    }
    return vm;
  }

  // acc[q] = combine(acc[q], body), guarded where a spatial or reduce axis has a tail.
  Stmt update(const Expr& body) const {
    const Expr value = al_.lower(ir::substitute(read_staged(body, staged_), axis_values()));
    const Expr q = acc_index();
    Stmt s = loop::make_store(acc_, q, ir::reduce_combine(op_.reduce, ir::load(acc_, q), value));
    Expr cond = point_in_range();
    for (size_t r = 0; r < op_.reduce_axes.size(); ++r) {
      if (divides(op_.reduce_axes[r].extent, c_.stage[r])) continue;
      cond = ir::logical_and(cond, ir::lt(reduce_value(r), op_.reduce_axes[r].extent));
    }
    return loop::make_if(cond, s);
  }

  // for ko...: [barrier; fetch tiles; barrier;] for ki... ku... register tile: update.
  Stmt reduce_steps(const Expr& body) const {
    const size_t m = op_.reduce_axes.size();
    std::vector<Var> ki_vars, ku_vars;
    std::vector<int64_t> ki_ext, ku_ext;
    for (size_t r = 0; r < m; ++r) {
      ki_vars.push_back(ki_[r]);
      ki_ext.push_back(c_.stage[r] / c_.unroll[r]);
      ku_vars.push_back(ku_[r]);
      ku_ext.push_back(c_.unroll[r]);
    }
    Stmt compute = nest(ku_vars, ku_ext, ForKind::kUnrolled, over_register_tile(update(body)));
    compute = nest(ki_vars, ki_ext, ForKind::kSerial, compute);
    std::vector<Stmt> step;
    if (!staged_.empty()) {
      // The first barrier keeps the previous step's readers ahead of this step's writers.
      step.push_back(loop::make_barrier());
      for (const StagedAccess& s : staged_) {
        step.push_back(cooperative_fetch(s, tx_, c_.threads(), al_));
      }
      step.push_back(loop::make_barrier());
    }
    step.push_back(compute);
    Stmt s = loop::make_seq(step);
    for (size_t r = m; r-- > 0;) {
      s = loop::make_for(ko_[r], ir::int_imm(0), steps_[r], ForKind::kSerial, s);
    }
    return s;
  }

  // out[point] = epilogue(acc[q]) for the register points inside the output.
  Stmt write_back() const {
    const Stage& stage = plan_.stages[0];
    const ir::Tensor& written = stage.written();
    const Expr acc_value = ir::load(acc_, acc_index());
    Expr value = acc_value;
    std::vector<Expr> point;  // the op's point, then the written tensor's (written_point)
    ir::VarMap vm;
    for (size_t a = 0; a < op_.axes.size(); ++a) {
      point.push_back(spatial(a));
      vm[op_.axes[a].var.get()] = point.back();
    }
    point = written_point(stage, point);
    if (stage.epilogue) {
      value = al_.lower(ir::substitute(epilogue_over_op_axes(stage, plan_.inlined, acc_value), vm));
    }
    const ir::Buffer& out = al_.buffer_of(written.get());
    return over_register_tile(
        loop::make_if(point_in_range(), loop::make_store(out, ir::flat_index(out, point), value)));
  }

  const StagePlan& plan_;
  const ir::ComputeOpNode& op_;
  const GpuTileConfig& c_;
  loop::LoweredFunc f_;
  AccessLowering al_;
  Expr blocks_;
  Var bx_, tx_;
  std::vector<Expr> block_coord_, thread_coord_, steps_, step_;
  std::vector<Var> vt_, ii_, ko_, ki_, ku_;
  std::vector<StagedAccess> staged_;
  ir::Buffer acc_;
};

// Threads and points along one axis for the default configuration.
void size_axis(int64_t extent, int64_t* threads, int64_t* points) {
  *threads = std::min(kDefaultAxisThreads, pow2_ceil(extent));
  *points = std::min(kDefaultAxisPoints, pow2_floor(std::max<int64_t>(1, extent / *threads)));
}

}  // namespace

int64_t GpuTileConfig::threads() const {
  int64_t t = 1;
  for (int64_t v : thread) t *= v;
  return t;
}

std::string GpuTileConfig::text() const {
  return "vthread=" + list_text(vthread) + " thread=" + list_text(thread) +
         " inner=" + list_text(inner) + " stage=" + list_text(stage) +
         " unroll=" + list_text(unroll);
}

int64_t tiled_shared_bytes(const StagePlan& plan, const GpuTileConfig& config) {
  TESSERA_CHECK(is_tiled_reduction_plan(plan)) << "GPU tiled schedule: not a single reduction";
  check_config(reduction_of(plan), config);
  return shared_bytes_of(plan, config);
}

bool is_tiled_reduction_plan(const StagePlan& plan) {
  return plan.stages.size() == 1 && plan.stages[0].op->op->reduce != ir::ReduceKind::kNone &&
         !plan.stages[0].op->op->reduce_axes.empty();
}

bool has_operand_reuse(const StagePlan& plan) { return reused_operands(plan) > 0; }

int reused_operands(const StagePlan& plan) {
  if (!is_tiled_reduction_plan(plan)) return 0;
  const Expr body = inline_body(plan.stages[0].op, plan.inlined);
  std::set<const ir::TensorNode*> operands;
  for (const Expr& access : distinct_accesses(body)) {
    if (reused(access, reduction_of(plan))) operands.insert(access->tensor.get());
  }
  return static_cast<int>(operands.size());
}

GpuTileConfig default_tile_config(const StagePlan& plan) {
  TESSERA_CHECK(is_tiled_reduction_plan(plan)) << "GPU tiled schedule: not a single reduction";
  const ir::ComputeOpNode& op = reduction_of(plan);
  const size_t n = op.axes.size(), m = op.reduce_axes.size();
  GpuTileConfig c;
  c.vthread.assign(n, 1);
  c.thread.assign(n, 1);
  c.inner.assign(n, 1);
  // The innermost axis takes its register points as vthreads: neighbouring threads then read
  // neighbouring shared-memory words (no bank conflicts) and write neighbouring outputs.
  int sized = 0;
  for (size_t a = n; a-- > 0 && sized < 2;) {
    const int64_t e = extent_hint(op.axes[a].extent);
    if (e <= 1) continue;
    int64_t t = 1, p = 1;
    size_axis(e, &t, &p);
    c.thread[a] = t;
    (sized == 0 ? c.vthread[a] : c.inner[a]) = p;
    ++sized;
  }
  // Whole short reduce axes (kernel windows), then one longer axis up to the step budget.
  c.stage.assign(m, 1);
  int64_t values = 1;
  for (size_t r = m; r-- > 0;) {
    const int64_t e = extent_hint(op.reduce_axes[r].extent);
    const int64_t s = e <= kWholeReduceAxis ? e : std::max<int64_t>(1, kDefaultStepValues / values);
    c.stage[r] = std::min(e, s);
    values *= c.stage[r];
  }
  // Shrink the steps, then the register tiles, then the thread tiles (a strided window's input
  // tile spans stride x threads rows: a 16x16 patch embedding's 241 for 16 threads), until the
  // staged tiles fit.
  while (shared_bytes_of(plan, c) > kMaxStaticSharedBytes) {
    auto widest = std::max_element(c.stage.begin(), c.stage.end());
    if (widest != c.stage.end() && *widest > 1) {
      *widest = (*widest + 1) / 2;
      continue;
    }
    auto most = std::max_element(c.inner.begin(), c.inner.end());
    auto most_v = std::max_element(c.vthread.begin(), c.vthread.end());
    if (*most > 1) {
      *most /= 2;
    } else if (*most_v > 1) {
      *most_v /= 2;
    } else if (auto most_t = std::max_element(c.thread.begin(), c.thread.end()); *most_t > 1) {
      *most_t /= 2;
    } else {
      break;  // lowering reports the overflow
    }
  }
  c.unroll.assign(m, 1);
  for (size_t r = 0; r < m; ++r) {
    for (int64_t u = std::min(kMaxUnroll, c.stage[r]); u >= 1; --u) {
      if (c.stage[r] % u == 0) {
        c.unroll[r] = u;
        break;
      }
    }
  }
  return c;
}

loop::LoweredFunc lower_tiled_reduction(const StagePlan& plan, const GpuTileConfig& config,
                                        const std::string& name) {
  TESSERA_CHECK(is_tiled_reduction_plan(plan))
      << "GPU tiled schedule: the plan of " << name
      << " is not one reduction stage (other computes inlined)";
  check_config(reduction_of(plan), config);
  return TiledLowering(plan, config, name).lower();
}

}  // namespace tessera::schedule::gpu
