// Boundary relaxing and tightening (EinNet 4.1).
#include <sstream>

#include "derive/config.h"
#include "derive/index_analysis.h"
#include "derive/rules_intra.h"

namespace tessera::derive {

using ir::Expr;
using ir::IterVar;
using ir::Tensor;

namespace {

const IterVar* iterator_at(const Tensor& scope, bool reduce_axis, int axis) {
  const auto& ivs = reduce_axis ? scope->op->reduce_axes : scope->op->axes;
  if (axis < 0 || static_cast<size_t>(axis) >= ivs.size()) return nullptr;
  return &ivs[axis];
}

// Whether the body of `scope` is provably 0 while iterator `v` lies in [lo, hi] (empty ranges
// are trivially fine).
bool body_zero_on(const Tensor& scope, const IterVar& v, int64_t lo, int64_t hi) {
  if (lo > hi) return true;
  ir::BoundMap bounds{{v.var.get(), ir::ConstIntBound{lo, hi}}};
  return provably_zero(scope->op->body, &bounds);
}

// Every read of `scope` by another scope lies provably inside [0, extent) at dimension `axis`.
bool reads_inside_dim(const State& s, const Tensor& scope, int axis) {
  const int64_t extent = const_shape(scope)[axis];
  for (const Tensor& c : consumers(s, scope)) {
    for (const Expr& r : accesses_of(c->op->body, scope)) {
      const ir::ConstIntBound b = index_bound(r->operands[axis]);
      if (b.lo == ir::kNoLowerBound || b.hi == ir::kNoUpperBound || b.lo < 0 || b.hi >= extent) {
        return false;
      }
    }
  }
  return true;
}

// Reads of a reshaped traversal iterator move by `shift`.
Reindex shift_dim(int axis, int64_t shift) {
  return [axis, shift](const std::vector<Expr>& idx) {
    std::vector<Expr> out = idx;
    out[axis] = out[axis] + ir::int_imm(shift);
    return out;
  };
}

std::string describe(const char* rule, const Tensor& scope, const IterVar& iv, int64_t a,
                     int64_t b) {
  std::ostringstream os;
  os << rule << "(" << scope->name << "." << iv.var->name << ": " << a << ", " << b << ")";
  return os.str();
}

}  // namespace

std::optional<State> relax_boundary(const State& s, const Tensor& scope, bool reduce_axis, int axis,
                                    int64_t low, int64_t high) {
  if (scope->is_placeholder() || !has_const_extents(scope)) return std::nullopt;
  const IterVar* iv = iterator_at(scope, reduce_axis, axis);
  if (!iv || low < 0 || high < 0 || low + high == 0) return std::nullopt;
  const int64_t extent = const_extent(*iv);
  if (reduce_axis) {
    if (scope->op->reduce != ir::ReduceKind::kSum) return std::nullopt;
    if (!body_zero_on(scope, *iv, -low, -1) ||
        !body_zero_on(scope, *iv, extent, extent + high - 1)) {
      return std::nullopt;
    }
    Tensor relaxed = shift_iterator(scope, true, axis, extent + low + high, low);
    return replace_scope(s, scope, {relaxed, {}},
                         describe("relax_boundary", scope, *iv, low, high));
  }
  if (is_output(s, scope) || !reads_inside_dim(s, scope, axis)) return std::nullopt;
  Tensor relaxed = shift_iterator(scope, false, axis, extent + low + high, low);
  return replace_scope(s, scope, {relaxed, shift_dim(axis, low)},
                       describe("relax_boundary", scope, *iv, low, high));
}

std::vector<State> boundary_relaxings(const State& s) {
  std::vector<State> out;
  for (const Tensor& scope : scopes(s)) {
    for (size_t a = 0; a < scope->op->reduce_axes.size(); ++a) {
      if (const_extent(scope->op->reduce_axes[a]) % 2 == 0) continue;
      if (auto next =
              relax_boundary(s, scope, true, static_cast<int>(a), 0, DeriveConstants::kRelaxStep)) {
        out.push_back(std::move(*next));
      }
    }
  }
  return out;
}

std::optional<State> tighten_boundary(const State& s, const Tensor& scope, bool reduce_axis,
                                      int axis, int64_t lo, int64_t hi) {
  if (scope->is_placeholder() || !has_const_extents(scope)) return std::nullopt;
  const IterVar* iv = iterator_at(scope, reduce_axis, axis);
  if (!iv) return std::nullopt;
  const int64_t extent = const_extent(*iv);
  if (lo < 0 || hi >= extent || lo > hi || (lo == 0 && hi == extent - 1)) return std::nullopt;
  const ir::ReduceKind kind = scope->op->reduce;
  if (reduce_axis && kind != ir::ReduceKind::kSum) return std::nullopt;
  if (!reduce_axis && (is_output(s, scope) || scope->pad_value != 0.0 ||
                       (kind != ir::ReduceKind::kSum && kind != ir::ReduceKind::kNone))) {
    return std::nullopt;
  }
  if (!body_zero_on(scope, *iv, 0, lo - 1) || !body_zero_on(scope, *iv, hi + 1, extent - 1)) {
    return std::nullopt;
  }
  Tensor tight = shift_iterator(scope, reduce_axis, axis, hi - lo + 1, -lo);
  Reindex reindex = reduce_axis ? Reindex() : shift_dim(axis, -lo);
  return replace_scope(s, scope, {tight, reindex},
                       describe("tighten_boundary", scope, *iv, lo, hi));
}

namespace {

// The tightest [lo, hi] whose removed end points are provably 0 for iterator `iv`.
std::pair<int64_t, int64_t> tight_range(const Tensor& scope, const IterVar& iv) {
  int64_t lo = 0, hi = const_extent(iv) - 1;
  while (lo <= hi && body_zero_on(scope, iv, lo, lo)) ++lo;
  while (hi >= lo && body_zero_on(scope, iv, hi, hi)) --hi;
  return {lo, hi};
}

}  // namespace

std::vector<State> boundary_tightenings(const State& s) {
  std::vector<State> out;
  for (const Tensor& scope : scopes(s)) {
    if (!has_const_extents(scope)) continue;
    for (bool reduce_axis : {false, true}) {
      const auto& ivs = reduce_axis ? scope->op->reduce_axes : scope->op->axes;
      for (size_t a = 0; a < ivs.size(); ++a) {
        auto [lo, hi] = tight_range(scope, ivs[a]);
        if (lo > hi) continue;  // all zero: a constant scope, left to constant folding
        if (auto next = tighten_boundary(s, scope, reduce_axis, static_cast<int>(a), lo, hi)) {
          out.push_back(std::move(*next));
        }
      }
    }
  }
  return out;
}

}  // namespace tessera::derive
