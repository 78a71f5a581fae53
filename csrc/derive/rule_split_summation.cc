// Summation splitting (EinNet 4.1).
#include <algorithm>
#include <set>
#include <sstream>

#include "derive/config.h"
#include "derive/rules_intra.h"

namespace tessera::derive {

using ir::Expr;
using ir::IterVar;
using ir::Tensor;

namespace {

bool is_proper_subset(const std::vector<int>& outer, size_t n) {
  if (outer.empty() || outer.size() >= n) return false;
  std::set<int> seen;
  for (int i : outer) {
    if (i < 0 || static_cast<size_t>(i) >= n || !seen.insert(i).second) return false;
  }
  return true;
}

std::string describe(const Tensor& scope, const std::vector<IterVar>& outer) {
  std::ostringstream os;
  os << "split_summation(" << scope->name << ": outer {";
  for (size_t i = 0; i < outer.size(); ++i) os << (i ? "," : "") << outer[i].var->name;
  os << "})";
  return os.str();
}

}  // namespace

std::optional<State> split_summation(const State& s, const Tensor& scope,
                                     const std::vector<int>& outer) {
  if (scope->is_placeholder() || scope->op->reduce == ir::ReduceKind::kNone) return std::nullopt;
  const ir::ComputeOpNode& op = *scope->op;
  if (!is_proper_subset(outer, op.reduce_axes.size()) || !has_const_extents(scope)) {
    return std::nullopt;
  }
  std::vector<IterVar> outer_axes, inner_axes;
  for (size_t i = 0; i < op.reduce_axes.size(); ++i) {
    const bool in_outer = std::find(outer.begin(), outer.end(), static_cast<int>(i)) != outer.end();
    (in_outer ? outer_axes : inner_axes).push_back(op.reduce_axes[i]);
  }
  // Inner scope: traversal = x then s1 (its layout), summation = s2.
  ir::VarMap inner_map;
  std::vector<IterVar> inner_trav = fresh_copies(op.axes, &inner_map);
  std::vector<IterVar> inner_s1 = fresh_copies(outer_axes, &inner_map);
  inner_trav.insert(inner_trav.end(), inner_s1.begin(), inner_s1.end());
  std::vector<IterVar> inner_s2 = fresh_copies(inner_axes, &inner_map);
  Tensor inner = make_scope(scope->name + "_in", inner_trav, inner_s2, op.reduce,
                            substitute_body(op.body, inner_map), "derived");
  // Outer scope: L_x sum_{s1} inner[x, s1].
  ir::VarMap outer_map;
  std::vector<IterVar> x = fresh_copies(op.axes, &outer_map);
  std::vector<IterVar> s1 = fresh_copies(outer_axes, &outer_map);
  std::vector<Expr> idx = iter_exprs(x);
  for (const IterVar& iv : s1) idx.push_back(iv.var);
  Tensor outer_scope = make_scope(scope->name, x, s1, op.reduce, ir::access(inner, idx), "derived",
                                  scope->pad_value);
  return replace_scope(s, scope, {outer_scope, {}}, describe(scope, outer_axes));
}

std::vector<State> summation_splittings(const State& s) {
  std::vector<State> out;
  for (const Tensor& scope : scopes(s)) {
    const size_t n = scope->op->reduce_axes.size();
    if (n < 2 || n > DeriveConstants::kMaxSplitSummationIterators) continue;
    // Every non-empty proper subset as the outer summation.
    for (uint32_t mask = 1; mask + 1 < (1u << n); ++mask) {
      std::vector<int> outer;
      for (size_t i = 0; i < n; ++i) {
        if (mask & (1u << i)) outer.push_back(static_cast<int>(i));
      }
      if (auto next = split_summation(s, scope, outer)) out.push_back(std::move(*next));
    }
  }
  return out;
}

}  // namespace tessera::derive
