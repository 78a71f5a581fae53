#include "derive/choose.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>

#include "compiler/compile.h"
#include "cost/peak_probe.h"
#include "derive/config.h"
#include "derive/index_analysis.h"
#include "ops/conv.h"
#include "ops/linalg.h"
#include "schedule/stage_plan.h"
#include "util/check.h"

namespace tessera::derive {

using ir::Expr;
using ir::Tensor;
using runtime::NDArray;

namespace {

// select(0 <= i_d < n_d for the dims that may leave the shape, T[i], pad). The read keeps its
// index: every consumer of loop IR evaluates a select's branch only where it is taken (a masked
// vector load, schedule/lower_access.h), whereas an index clamped into the shape would make a
// vector read along a padded axis a gather.
class ExplicitPadding : public ir::ExprMutator {
 public:
  Expr mutate(const Expr& e) override {
    Expr m = mutate_children(e);
    if (m->kind != ir::ExprKind::kAccess || reads_in_bounds(m)) return m;
    const std::vector<int64_t> shape = const_shape(m->tensor);
    Expr cond = ir::bool_imm(true);
    for (size_t d = 0; d < shape.size(); ++d) {
      const Expr& i = m->operands[d];
      const ir::ConstIntBound b = index_bound(i);
      if (b.lo >= 0 && b.hi < shape[d] && b.lo != ir::kNoLowerBound && b.hi != ir::kNoUpperBound) {
        continue;
      }
      cond = ir::logical_and(
          cond, ir::logical_and(ir::ge(i, ir::int_imm(0)), ir::lt(i, ir::int_imm(shape[d]))));
    }
    return ir::select(cond, m, ir::make_const(m->dtype, m->tensor->pad_value));
  }
};

double seconds_to_ms(double s) { return s * 1e3; }

}  // namespace

State explicit_padding(const State& s) {
  return map_bodies(
      s, [](const Tensor&, const Expr& body) { return ExplicitPadding().mutate(body); },
      "explicit_padding");
}

std::vector<NDArray> run_compiled(const State& s,
                                  const std::map<const ir::TensorNode*, NDArray>& inputs,
                                  double* time_ms, const runtime::MeasureOptions& options,
                                  compiler::TuneMode tune) {
  const State padded = explicit_padding(s);
  const std::vector<Tensor> params = ir::collect_dag(padded.outputs).placeholders;
  compiler::CompileRequest req;
  req.name = "derived";
  req.tune = tune;
  const compiler::CompileResult r = compiler::compile(padded.outputs, params, req);
  std::vector<NDArray> outs;
  for (const Tensor& o : padded.outputs) outs.emplace_back(o->dtype, const_shape(o));
  std::vector<NDArray> ins;
  std::vector<void*> ptrs;
  for (const Tensor& p : params) {
    ins.push_back(inputs.at(p.get()));
    ptrs.push_back(ins.back().data());
  }
  for (NDArray& o : outs) ptrs.push_back(o.data());
  r.kernel->run(ptrs, {});
  if (time_ms) {
    const runtime::MeasureResult m = runtime::measure([&] { r.kernel->run(ptrs, {}); }, options);
    *time_ms = m.median_ms;
  }
  return outs;
}

namespace {

std::vector<Expr> expr_dims(const std::vector<int64_t>& d) {
  std::vector<Expr> out;
  for (int64_t v : d) out.push_back(ir::int_imm(v));
  return out;
}

// Reads of the scope's compute inputs retargeted to placeholders of their shapes.
class ReadPlaceholders : public ir::ExprMutator {
 public:
  Expr mutate(const Expr& e) override {
    Expr m = mutate_children(e);
    if (m->kind != ir::ExprKind::kAccess || m->tensor->is_placeholder()) return m;
    Tensor& p = placeholders_[m->tensor.get()];
    if (!p) p = ir::placeholder(m->tensor->name, m->tensor->shape, m->tensor->dtype);
    return ir::access(p, m->operands);
  }

 private:
  std::map<const ir::TensorNode*, Tensor> placeholders_;
};

// The scope alone, its compute inputs given as placeholders (G2BMM's kernel is Tessera's
// kernel of the scope itself).
Tensor standalone(const Tensor& scope) {
  const ir::ComputeOpNode& op = *scope->op;
  return make_scope(scope->name, op.axes, op.reduce_axes, op.reduce,
                    ReadPlaceholders().mutate(op.body), scope->op->tag, scope->pad_value);
}

// The matched operator as Tessera builds it, over fresh placeholders.
State operator_program(const OperatorMatch& m) {
  if (m.kind == OperatorKind::kG2bmm) return State{{standalone(m.scope)}, {}};
  if (m.kind == OperatorKind::kConv2d) {
    Tensor x = ir::placeholder("X", expr_dims(m.conv.x_shape));
    Tensor w = ir::placeholder("W", expr_dims(m.conv.w_shape));
    return State{{ops::conv2d(x, w, nullptr, {m.stride[0], m.stride[1]},
                              {m.padding[0], m.padding[1]}, {m.dilation[0], m.dilation[1]})},
                 {}};
  }
  TESSERA_CHECK(m.kind == OperatorKind::kMatmul || m.kind == OperatorKind::kBatchMatmul)
      << "derive: no predefined kernel to time for " << operator_kind_name(m.kind);
  const bool batched = m.kind == OperatorKind::kBatchMatmul;
  auto shape = [&](int64_t r, int64_t c) {
    return batched ? expr_dims({m.B, r, c}) : expr_dims({r, c});
  };
  Tensor a = ir::placeholder("A", shape(m.M, m.K));
  Tensor b = ir::placeholder("B", shape(m.K, m.N));
  return State{{batched ? ops::batch_matmul(a, b) : ops::matmul(a, b)}, {}};
}

}  // namespace

bool has_predefined_kernel(OperatorKind k) { return k != OperatorKind::kElementwise; }

double time_operator(const OperatorMatch& m, const runtime::MeasureOptions& options,
                     compiler::TuneMode tune) {
  const State s = operator_program(m);
  std::map<const ir::TensorNode*, NDArray> in;
  uint64_t seed = 1;
  for (const Tensor& p : ir::collect_dag(s.outputs).placeholders) {
    in.emplace(p.get(), NDArray::random(p->dtype, const_shape(p), seed++));
  }
  double ms = -1;
  run_compiled(s, in, &ms, options, tune);
  return ms;
}

double estimate_eoperator_ms(const Tensor& scope, double bandwidth_gbs) {
  const double bytes = scope_cost(scope).elements * ir::dtype_bytes(scope->dtype);
  return seconds_to_ms(bytes / (bandwidth_gbs * 1e9));
}

namespace {

// Layout eOperators of a match's activation operands: read and write the operand once.
double layout_ms(const OperatorMatch& m, const DeriveContext& ctx, double bandwidth_gbs) {
  double bytes = 0;
  auto add = [&](const OperandLayout& o, int64_t rows, int64_t cols) {
    if (!o.needs_layout || is_weight_only(o.tensor, ctx)) return;
    bytes += 2.0 * static_cast<double>(m.B * rows * cols) * ir::dtype_bytes(o.tensor->dtype);
  };
  add(m.a, m.M, m.K);
  add(m.b, m.K, m.N);
  add(m.out, m.M, m.N);
  return seconds_to_ms(bytes / (bandwidth_gbs * 1e9));
}

// Operators of one kind and shape share a timing.
std::string operator_key(const OperatorMatch& m) {
  std::ostringstream os;
  // A G2BMM is its scope's own kernel: one timing per scope.
  if (m.kind == OperatorKind::kG2bmm) os << m.scope.get() << " ";
  os << operator_kind_name(m.kind) << " " << m.B << "x" << m.M << "x" << m.N << "x" << m.K;
  if (m.kind == OperatorKind::kConv2d) {
    for (const auto* v : {&m.stride, &m.padding, &m.dilation}) {
      for (int64_t x : *v) os << " " << x;
    }
    for (const auto* shape : {&m.conv.x_shape, &m.conv.w_shape}) {
      for (int64_t d : *shape) os << " " << d;
    }
  }
  return os.str();
}

double max_rel_error(const std::vector<NDArray>& got, const std::vector<NDArray>& want) {
  double diff = 0, scale = 0;
  for (size_t o = 0; o < want.size(); ++o) {
    for (int64_t i = 0; i < want[o].numel(); ++i) {
      diff = std::max(diff, std::abs(got[o].get(i) - want[o].get(i)));
      scale = std::max(scale, std::abs(want[o].get(i)));
    }
  }
  return scale > 0 ? diff / scale : diff;
}

// A scope that only reshapes a reduction (S[.., m, ..] = S'[.., m // D, m % D, ..]) costs
// nothing: the stage plan writes the reduction through its buffer (stage_plan.h).
bool is_reshape_of_reduction(const Tensor& scope) {
  const Expr& body = scope->op->body;
  return body->kind == ir::ExprKind::kAccess && !body->tensor->is_placeholder() &&
         body->tensor->op->reduce != ir::ReduceKind::kNone &&
         schedule::reshape_groups(scope, body, body->tensor).has_value();
}

// The derivation's cost without its timed operators: estimated eOperators and layouts, plus
// each operator's FLOPs at kOperatorPeakHeadroom times the machine's FMA peak, a bound no
// kernel of it can beat. `to_time` gets the operators a timing needs.
DerivationCost cost_bound(const Derivation& d, const DeriveContext& ctx, double bandwidth_gbs,
                          double peak_gflops, std::vector<const OperatorMatch*>* to_time) {
  DerivationCost cost;
  for (const ScopeChoice& c : d.choices) {
    if (c.role == ScopeRole::kCompileTime || is_reshape_of_reduction(c.scope)) continue;
    if (c.role == ScopeRole::kEOperator || !c.match || !has_predefined_kernel(c.match->kind)) {
      cost.eoperator_ms += estimate_eoperator_ms(c.scope, bandwidth_gbs);
      continue;
    }
    cost.operator_ms += seconds_to_ms(scope_cost(c.scope).flops /
                                      (DeriveConstants::kOperatorPeakHeadroom * peak_gflops * 1e9));
    cost.eoperator_ms += layout_ms(*c.match, ctx, bandwidth_gbs);
    to_time->push_back(&*c.match);
  }
  return cost;
}

// Timings of predefined operators, one per kind, shape and tuning mode.
class OperatorTimings {
 public:
  explicit OperatorTimings(const runtime::MeasureOptions& measure) : measure_(measure) {}
  double ms(const OperatorMatch& m, compiler::TuneMode tune) {
    const std::string key = operator_key(m) + " " + compiler::tune_mode_name(tune);
    auto it = ms_.find(key);
    if (it == ms_.end()) it = ms_.emplace(key, time_operator(m, measure_, tune)).first;
    return it->second;
  }

 private:
  const runtime::MeasureOptions& measure_;
  std::map<std::string, double> ms_;
};

// The cost with the operators timed: matmuls and convolutions with the rules' schedules (the
// predefined kernels as they run), G2BMMs as `g2bmm_tune` says.
DerivationCost timed_cost(double untimed_ms, const std::vector<const OperatorMatch*>& ops,
                          compiler::TuneMode g2bmm_tune, OperatorTimings* timings) {
  DerivationCost cost;
  cost.eoperator_ms = untimed_ms;
  cost.operators_timed = true;
  for (const OperatorMatch* m : ops) {
    cost.operator_ms += timings->ms(
        *m, m->kind == OperatorKind::kG2bmm ? g2bmm_tune : compiler::TuneMode::kDefault);
  }
  return cost;
}

}  // namespace

Choice choose_by_measurement(const State& original, const SearchResult& result,
                             const DeriveContext& ctx, const ChoiceConfig& config) {
  const cost::PeakInfo peak = cost::get_peak_info();
  const double bw = config.bandwidth_gbs > 0 ? config.bandwidth_gbs : peak.mem_bw_gbs_all;
  TESSERA_CHECK(bw > 0) << "derive: no memory bandwidth for eOperator estimates";
  TESSERA_CHECK(peak.fp32_gflops_all > 0) << "derive: no FMA peak for operator bounds";
  Choice choice;
  // The original program, compiled and timed as a whole first (its time bounds which
  // derivations are worth timing), and its values for the checks.
  std::map<const ir::TensorNode*, NDArray> inputs;
  uint64_t seed = config.seed;
  for (const Tensor& p : ir::collect_dag(original.outputs).placeholders) {
    inputs.emplace(p.get(), NDArray::random(p->dtype, const_shape(p), seed++));
  }
  const std::vector<NDArray> want = run_compiled(
      original, inputs, config.original_ms > 0 ? nullptr : &choice.original_ms, config.measure);
  if (config.original_ms > 0) choice.original_ms = config.original_ms;
  // Operators are timed only for derivations that could still beat the original (their bound
  // is below its time: one whose bound is not could never be tried below), one timing per
  // kind, shape and tuning mode.
  OperatorTimings timings(config.measure);
  for (const Derivation& d : result.derivations) {
    std::vector<const OperatorMatch*> ops;
    DerivationCost cost = cost_bound(d, ctx, bw, peak.fp32_gflops_all, &ops);
    if (cost.total_ms() < choice.original_ms) {
      const double untimed_ms = cost.eoperator_ms;
      cost = timed_cost(untimed_ms, ops, compiler::TuneMode::kDefault, &timings);
      // A G2BMM is a derived scope's own kernel, which runs as the program will be compiled:
      // tuned (seconds per shape) only where tuning could make the derivation win.
      const bool tunes_g2bmm = config.tune != compiler::TuneMode::kDefault &&
                               std::any_of(ops.begin(), ops.end(), [](const OperatorMatch* m) {
                                 return m->kind == OperatorKind::kG2bmm;
                               });
      if (tunes_g2bmm &&
          untimed_ms + cost.operator_ms / DeriveConstants::kMaxTuningGain < choice.original_ms) {
        cost = timed_cost(untimed_ms, ops, config.tune, &timings);
      }
    }
    choice.costs.push_back(cost);
  }
  std::vector<size_t> order(result.derivations.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    return choice.costs[x].total_ms() < choice.costs[y].total_ms();
  });
  size_t tried = 0;
  for (size_t i : order) {
    DerivationCost& cost = choice.costs[i];
    if (cost.total_ms() >= choice.original_ms || tried >= config.max_verifications) break;
    ++tried;
    try {
      cost.rel_error = max_rel_error(run_compiled(result.derivations[i].state, inputs), want);
      cost.verified = cost.rel_error <= config.tolerance;
      if (!cost.verified) cost.error = "values differ from the original";
    } catch (const Error& e) {
      cost.error = e.what();
    }
    if (cost.verified) {
      choice.finalists.push_back(static_cast<int>(i));
      if (choice.finalists.size() >= config.finalists) break;
    }
  }
  if (!choice.finalists.empty()) choice.chosen = choice.finalists.front();
  return choice;
}

}  // namespace tessera::derive
