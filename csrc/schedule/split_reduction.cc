#include "schedule/split_reduction.h"

#include <algorithm>
#include <unordered_map>

#include "ir/functor.h"
#include "ir/simplify.h"
#include "schedule/default_schedule.h"
#include "util/check.h"

namespace tessera::schedule {

using ir::Expr;
using ir::IterVar;
using ir::Tensor;
using ir::Var;

namespace {

// An extent with no constant upper bound (a size variable without a declared range) is planned
// as if it could be this long: enough levels for any tensor that fits in memory.
constexpr int64_t kAssumedLongestExtent = int64_t{1} << 40;

// Upper bound of an extent, with every size variable that has no upper bound taken as
// kAssumedLongestExtent (so that the blocks of a split extent count fewer values than it).
int64_t extent_bound(const Expr& extent) {
  ir::BoundMap assumed;
  for (const Var& v : ir::free_vars(extent)) {
    if (v->hi == ir::kNoUpperBound) assumed[v.get()] = {v->lo, kAssumedLongestExtent};
  }
  const int64_t hi = ir::const_int_bound(extent, &assumed).hi;
  return std::max<int64_t>(0, std::min(hi, kAssumedLongestExtent));
}

// Product of the extents' upper bounds, saturating at kAssumedLongestExtent.
int64_t count_bound(const std::vector<IterVar>& axes) {
  int64_t p = 1;
  for (const IterVar& iv : axes) {
    const int64_t b = extent_bound(iv.extent);
    if (b == 0) return 0;
    p = p > kAssumedLongestExtent / b ? kAssumedLongestExtent : p * b;
  }
  return p;
}

std::vector<Expr> extents_of(const std::vector<IterVar>& axes, size_t begin, size_t end) {
  std::vector<Expr> out;
  for (size_t i = begin; i < end; ++i) out.push_back(axes[i].extent);
  return out;
}

// A float sum is split when one output point combines more than `chunk` values, except a row
// sum (one reduce axis read contiguously) over many output points and at most chunk^2 values:
// its stage keeps the chunks itself (kSumChunk in lower_stage.cc) and stays fused with the rest
// of its row (softmax, norms). Few output points are split in any case: the chunk partials are
// then the parallel work.
bool needs_split(const ir::ComputeOpNode& op, int64_t chunk) {
  if (op.reduce != ir::ReduceKind::kSum || !ir::is_float(op.body->dtype)) return false;
  const int64_t count = count_bound(op.reduce_axes);
  if (count <= chunk) return false;
  const bool row_sum =
      op.reduce_axes.size() == 1 && reads_innermost_along(op.body, op.reduce_axes.back().var);
  const bool in_stage = count / chunk <= chunk && count_bound(op.axes) >= kFewOutputPoints;
  return !(row_sum && in_stage);
}

// Reduce over `extents` of `f`, as a new op (tag "reduce": the pieces are plain reductions).
Tensor sum_of(const std::string& name, std::vector<Expr> shape, std::vector<Expr> extents,
              const std::function<Expr(const std::vector<Var>&, const std::vector<Var>&)>& f) {
  return ir::reduce(name, std::move(shape), std::move(extents), ir::ReduceKind::kSum, f);
}

// The sum of `t` (a floating-point sum whose reduce axes may count more than `chunk` values) as
// a tree of sums of at most `chunk` values each; the result is named like `t`.
//
// The reduce axes are row-major (innermost last). The longest suffix of them that counts at most
// `chunk` values stays whole; the axis before it, of extent E, is cut into Q = E / c blocks of
// c = chunk / (suffix count) steps:
//   part[outer, q, A] = sum over (step < c, suffix) of body with the cut axis at q * c + step
//   main[A]           = sum over (outer, q) of part           (split again while too long)
//   tail[A]           = sum over (outer, E - Q * c, suffix) of body at Q * c + ...  (when E % c)
//   t[A]              = main + tail
Tensor cascade(const Tensor& t, int64_t chunk) {
  const ir::ComputeOpNode& op = *t->op;
  if (!needs_split(op, chunk)) return t;
  const std::vector<IterVar>& axes = op.axes;
  const std::vector<IterVar>& raxes = op.reduce_axes;
  const size_t n = axes.size(), m = raxes.size();

  size_t keep = m;  // raxes[keep..m) stay whole
  int64_t kept = 1;
  while (keep > 0) {
    const int64_t b = extent_bound(raxes[keep - 1].extent);
    if (b > chunk / std::max<int64_t>(kept, 1)) break;
    kept *= std::max<int64_t>(b, 1);
    --keep;
  }
  TESSERA_CHECK(keep > 0) << "sum " << t->name << " counts at most " << chunk << " values";
  const size_t cut = keep - 1;
  const int64_t steps = std::max<int64_t>(1, chunk / kept);
  const Expr extent = raxes[cut].extent;
  const Expr blocks = ir::simplify(ir::floordiv(extent, ir::int_imm(steps)));
  const Expr done = ir::simplify(blocks * ir::int_imm(steps));
  const Expr rest = ir::simplify(ir::floormod(extent, ir::int_imm(steps)));

  // Body of `t` with its axes and reduce axes replaced; the cut axis takes `cut_value`.
  auto body_at = [&](const std::vector<Var>& a, const std::vector<Var>& outer,
                     const Expr& cut_value, const std::vector<Var>& suffix) {
    ir::VarMap vm;
    for (size_t i = 0; i < n; ++i) vm[axes[i].var.get()] = a[i];
    for (size_t i = 0; i < cut; ++i) vm[raxes[i].var.get()] = outer[i];
    vm[raxes[cut].var.get()] = cut_value;
    for (size_t i = keep; i < m; ++i) vm[raxes[i].var.get()] = suffix[i - keep];
    return ir::substitute(op.body, vm);
  };
  auto split = [](const std::vector<Var>& v, size_t at) {
    return std::pair<std::vector<Var>, std::vector<Var>>{{v.begin(), v.begin() + at},
                                                         {v.begin() + at, v.end()}};
  };

  // part[outer, q, A]: the output's axes stay innermost, as in the tensor being summed (a
  // column sum's partials are rows that the next level reads as vectors).
  std::vector<Expr> part_shape = extents_of(raxes, 0, cut);
  part_shape.push_back(blocks);
  for (const Expr& e : extents_of(axes, 0, n)) part_shape.push_back(e);
  std::vector<Expr> part_extents = {ir::int_imm(steps)};
  for (const Expr& e : extents_of(raxes, keep, m)) part_extents.push_back(e);
  Tensor part = sum_of(t->name + "_part", part_shape, part_extents,
                       [&](const std::vector<Var>& o, const std::vector<Var>& r) {
                         auto [outer, a] = split(o, cut + 1);
                         const Var q = outer.back();
                         outer.pop_back();
                         auto [step, suffix] = split(r, 1);
                         return body_at(a, outer, q * ir::int_imm(steps) + step[0], suffix);
                       });

  const bool has_rest = !(rest->is_const_int() && rest->int_value == 0);
  std::vector<Expr> main_extents = extents_of(raxes, 0, cut);
  main_extents.push_back(blocks);
  Tensor main =
      cascade(sum_of(has_rest ? t->name + "_blocks" : t->name, extents_of(axes, 0, n), main_extents,
                     [&](const std::vector<Var>& o, const std::vector<Var>& r) {
                       std::vector<Expr> idx(r.begin(), r.end());
                       idx.insert(idx.end(), o.begin(), o.end());
                       return ir::access(part, idx);
                     }),
              chunk);
  if (!has_rest) return main;

  std::vector<Expr> tail_extents = extents_of(raxes, 0, cut);
  tail_extents.push_back(rest);
  for (const Expr& e : extents_of(raxes, keep, m)) tail_extents.push_back(e);
  Tensor tail = cascade(sum_of(t->name + "_tail", extents_of(axes, 0, n), tail_extents,
                               [&](const std::vector<Var>& o, const std::vector<Var>& r) {
                                 auto [outer, more] = split(r, cut);
                                 auto [last, suffix] = split(more, 1);
                                 return body_at(o, outer, done + last[0], suffix);
                               }),
                        chunk);
  return ir::compute(t->name, extents_of(axes, 0, n), [&](const std::vector<Var>& o) {
    std::vector<Expr> idx(o.begin(), o.end());
    return ir::access(main, idx) + ir::access(tail, idx);
  });
}

// `t` under another definition, keeping what readers of `t` see besides its values.
Tensor keep_identity(const Tensor& t, const Tensor& replacement) {
  auto node = std::make_shared<ir::TensorNode>(*replacement);
  node->name = t->name;
  node->pad_value = t->pad_value;
  return node;
}

// Rebuilds accesses of replaced tensors so that they read the replacements.
class RedirectAccesses : public ir::ExprMutator {
 public:
  explicit RedirectAccesses(const std::unordered_map<const ir::TensorNode*, Tensor>& to)
      : to_(to) {}
  Expr mutate(const Expr& e) override {
    Expr m = mutate_children(e);
    if (m->kind != ir::ExprKind::kAccess) return m;
    auto it = to_.find(m->tensor.get());
    return it == to_.end() ? m : ir::access(it->second, m->operands);
  }

 private:
  const std::unordered_map<const ir::TensorNode*, Tensor>& to_;
};

}  // namespace

int64_t reduce_count_bound(const ir::ComputeOpNode& op) { return count_bound(op.reduce_axes); }

bool is_long_float_sum(const ir::ComputeOpNode& op, ir::DType dtype) {
  return op.reduce == ir::ReduceKind::kSum && ir::is_float(dtype) &&
         reduce_count_bound(op) > kSumChunk;
}

std::vector<Tensor> split_long_sums(const std::vector<Tensor>& outputs, int64_t chunk) {
  TESSERA_CHECK(chunk >= 2) << "sum chunk must be at least 2, got " << chunk;
  const ir::TensorDAG dag = ir::collect_dag(outputs);
  bool any = false;
  for (const Tensor& t : dag.computes) any = any || needs_split(*t->op, chunk);
  if (!any) return outputs;

  std::unordered_map<const ir::TensorNode*, Tensor> replaced;
  RedirectAccesses redirect(replaced);
  for (const Tensor& t : dag.computes) {  // producers first
    Tensor now = t;
    Expr body = redirect.mutate(t->op->body);
    if (!body.same_as(t->op->body)) {
      auto op = std::make_shared<ir::ComputeOpNode>(*t->op);
      op->body = body;
      auto node = std::make_shared<ir::TensorNode>(*t);
      node->op = op;
      now = node;
    }
    if (Tensor split = cascade(now, chunk); split.get() != now.get()) {
      now = keep_identity(t, split);
    }
    if (now.get() != t.get()) replaced[t.get()] = now;
  }
  std::vector<Tensor> out;
  for (const Tensor& t : outputs) {
    auto it = replaced.find(t.get());
    out.push_back(it == replaced.end() ? t : it->second);
  }
  return out;
}

}  // namespace tessera::schedule
