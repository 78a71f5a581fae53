#include "tune/gensor/gpu_model.h"

#include <algorithm>
#include <numeric>

#include "ir/functor.h"
#include "ir/linear_form.h"
#include "util/check.h"

namespace tessera::tune::gensor {

namespace {

using schedule::gpu::GpuTileConfig;

constexpr int64_t kAssumedSymbolicExtent = 1024;
constexpr int64_t kWordBytes = 4;

int64_t hint(const ir::Expr& e) {
  return e->is_const_int() ? e->int_value : kAssumedSymbolicExtent;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

GpuTileSpace make_gpu_tile_space(const schedule::StagePlan& plan) {
  TESSERA_CHECK(schedule::gpu::is_tiled_reduction_plan(plan))
      << "GPU Gensor: the plan is not one reduction stage";
  const ir::ComputeOpNode& op = *plan.stages[0].op->op;
  GpuTileSpace sp;
  sp.plan = &plan;
  for (const ir::IterVar& a : op.axes) sp.extents.push_back(hint(a.extent));
  for (const ir::IterVar& r : op.reduce_axes) sp.reduce_extents.push_back(hint(r.extent));
  std::vector<ir::Expr> seen;
  ir::visit_expr(schedule::inline_body(plan.stages[0].op, plan.inlined), [&](const ir::Expr& e) {
    if (e->kind != ir::ExprKind::kAccess) return;
    for (const ir::Expr& s : seen) {
      if (ir::expr_equal(s, e)) return;
    }
    seen.push_back(e);
    std::vector<bool> uses;
    for (const ir::IterVar& a : op.axes) uses.push_back(ir::uses_var(e, a.var));
    sp.operand_axes.push_back(uses);
  });
  return sp;
}

GpuPrediction predict_gpu_tiles(const GpuTileSpace& sp, const GpuTileConfig& c,
                                const cost::GpuHardware& hw) {
  GpuPrediction p;
  const size_t n = sp.extents.size();
  int64_t points = 1, reduce = 1, acc = 1, steps = 1;
  p.blocks = 1;
  p.threads = c.threads();
  for (size_t a = 0; a < n; ++a) {
    points *= sp.extents[a];
    acc *= c.vthread[a] * c.inner[a];
    p.blocks *= ceil_div(sp.extents[a], c.vthread[a] * c.thread[a] * c.inner[a]);
  }
  for (size_t r = 0; r < sp.reduce_extents.size(); ++r) {
    reduce *= sp.reduce_extents[r];
    steps *= ceil_div(sp.reduce_extents[r], c.stage[r]);
  }
  // Operand words a thread reads per reduce value, and their worst bank-conflict degree. The
  // fastest thread axis is the last one with more than one thread.
  int fastest = -1;
  for (size_t a = n; a-- > 0;) {
    if (c.thread[a] > 1) {
      fastest = static_cast<int>(a);
      break;
    }
  }
  int64_t fragments = 0;
  double conflicted_words = 0;
  for (const std::vector<bool>& uses : sp.operand_axes) {
    int64_t w = 1;
    for (size_t a = 0; a < n; ++a) {
      if (uses[a]) w *= c.vthread[a] * c.inner[a];
    }
    const int64_t degree = fastest >= 0 && uses[fastest]
                               ? std::gcd<int64_t>(c.inner[fastest], hw.shared_banks)
                               : 1;  // a broadcast: every thread of the warp reads the same word
    p.bank_conflict = std::max(p.bank_conflict, degree);
    fragments += w;
    conflicted_words += static_cast<double>(w * degree);
  }
  p.registers = acc + fragments + kRegisterOverhead;
  auto infeasible = [&](const std::string& why) {
    p.feasible = false;
    p.why_infeasible = why;
    return p;
  };
  // Before the shared-memory count, which takes only configurations a block can run.
  if (p.threads > std::min(hw.max_threads_per_block, schedule::gpu::kMaxBlockThreads)) {
    return infeasible("too many threads per block");
  }
  p.shared_bytes = schedule::gpu::tiled_shared_bytes(*sp.plan, c);
  if (p.shared_bytes > hw.shared_bytes_per_block) return infeasible("shared memory per block");
  if (p.registers > hw.max_registers_per_thread) return infeasible("registers per thread");
  if (p.threads * p.registers > hw.registers_per_sm) return infeasible("registers per block");
  p.feasible = true;

  p.blocks_per_sm =
      std::min({hw.max_threads_per_sm / p.threads,
                hw.shared_bytes_per_sm / std::max<int64_t>(1, p.shared_bytes),
                hw.registers_per_sm / (p.threads * p.registers), hw.max_blocks_per_sm});
  const int64_t slots = std::max<int64_t>(1, hw.sms * p.blocks_per_sm);
  const int64_t waves = ceil_div(p.blocks, slots);
  p.wave_efficiency = static_cast<double>(p.blocks) / static_cast<double>(waves * slots);
  const int64_t block_warps = ceil_div(p.threads, hw.warp_size);
  const int64_t warps = p.blocks_per_sm * block_warps;
  const double hiding = std::min(1.0, static_cast<double>(warps) / kWarpsToHideLatency);
  // A warp issues for all its lanes: a block of fewer threads than its warps hold wastes them.
  const double lanes =
      static_cast<double>(p.threads) / static_cast<double>(block_warps * hw.warp_size);
  const double ilp = std::min(1.0, static_cast<double>(acc) / kMinIndependentFma);
  const double flops = 2.0 * static_cast<double>(points) * static_cast<double>(reduce);
  p.compute_s = flops / (hw.fp32_flops * p.wave_efficiency * hiding * lanes * ilp);

  const double staged = static_cast<double>(p.blocks) * steps * p.shared_bytes;
  const double writes = static_cast<double>(points) * kWordBytes;
  p.global_s = (staged + writes) / hw.dram_bytes_per_s;

  // Shared words read over the launch: per thread and reduce value, for every thread.
  const double thread_values = static_cast<double>(p.blocks) * p.threads * reduce;
  const double shared_words_per_s =
      hw.shared_bytes_per_clk / kWordBytes * hw.sms * hw.clock_hz * p.wave_efficiency * lanes;
  p.shared_s = conflicted_words * thread_values / shared_words_per_s;
  p.time_s = std::max({p.compute_s, p.global_s, p.shared_s});
  return p;
}

}  // namespace tessera::tune::gensor
