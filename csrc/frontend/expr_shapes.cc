#include "frontend/expr_shapes.h"

#include <algorithm>
#include <optional>

#include "frontend/expr_analysis.h"
#include "frontend/expr_error.h"
#include "ir/eval.h"
#include "ir/simplify.h"

namespace tessera::frontend {

using ir::Expr;

size_t node_begin(const AstNode& n) {
  if (n.kind == AstKind::kBinary) return std::min(n.offset, node_begin(*n.args[0]));
  return n.offset;
}

namespace {

// One index position: tensor `tensor` read at dim `dim` with expression `index`, under the
// conditions `guards` (of the where(...) calls whose chosen branch holds the read).
struct IndexUse {
  const AstNode* access;
  int dim;
  const AstNode* index;
  std::vector<const AstNode*> guards;
};

void collect_index_uses(const AstNode& n, std::vector<IndexUse>* out,
                        std::vector<const AstNode*>* guards) {
  if (n.kind == AstKind::kAccess) {
    for (size_t d = 0; d < n.args.size(); ++d)
      out->push_back({&n, static_cast<int>(d), n.args[d].get(), *guards});
    return;  // indices hold no accesses (checked by the analysis)
  }
  if (n.kind == AstKind::kCall && n.name == "where" && n.args.size() == 3) {
    collect_index_uses(*n.args[0], out, guards);
    guards->push_back(n.args[0].get());
    collect_index_uses(*n.args[1], out, guards);
    guards->pop_back();
    collect_index_uses(*n.args[2], out, guards);
    return;
  }
  for (const AstPtr& a : n.args) collect_index_uses(*a, out, guards);
}

void collect_index_uses(const AstNode& n, std::vector<IndexUse>* out) {
  std::vector<const AstNode*> guards;
  collect_index_uses(n, out, &guards);
}

// The comparisons a condition asserts: its operands joined by `and`, recursively.
void conjuncts(const AstNode& cond, std::vector<const AstNode*>* out) {
  if (cond.kind == AstKind::kBinary && cond.op == AstOp::kAnd) {
    conjuncts(*cond.args[0], out);
    conjuncts(*cond.args[1], out);
  } else if (cond.kind == AstKind::kBinary && is_comparison(cond.op)) {
    out->push_back(&cond);
  }
}

// Affine view of an index expression: sum(coef * iterator) + constant.
struct Affine {
  bool ok = true;
  std::map<std::string, int64_t> coefs;
  int64_t constant = 0;
};

// a * b + c into *out; false when it overflows int64 (literals are user text: the fuzzer found
// A[6666666666666666666 + 6666666666666666666 - i]).
bool checked_mul_add(int64_t a, int64_t b, int64_t c, int64_t* out) {
  int64_t p = 0;
  return !__builtin_mul_overflow(a, b, &p) && !__builtin_add_overflow(p, c, out);
}

// `a` scaled by k and shifted by k * `other` (k = +-1 for sums); false on overflow.
bool scale_into(const Affine& other, int64_t k, Affine* a) {
  for (const auto& [name, c] : other.coefs) {
    if (!checked_mul_add(c, k, a->coefs[name], &a->coefs[name])) return false;
  }
  return checked_mul_add(other.constant, k, a->constant, &a->constant);
}

Affine affine_of(const AstNode& n) {
  Affine a;
  switch (n.kind) {
    case AstKind::kNumber:
      a.constant = n.int_value;
      return a;
    case AstKind::kIter:
      a.coefs[n.name] = 1;
      return a;
    case AstKind::kUnary: {
      const Affine x = affine_of(*n.args[0]);
      if (x.ok && scale_into(x, -1, &a)) return a;
      break;
    }
    case AstKind::kBinary: {
      Affine l = affine_of(*n.args[0]), r = affine_of(*n.args[1]);
      if (!l.ok || !r.ok) break;
      if (n.op == AstOp::kAdd || n.op == AstOp::kSub) {
        a = l;
        if (scale_into(r, n.op == AstOp::kAdd ? 1 : -1, &a)) return a;
        break;
      }
      if (n.op == AstOp::kMul && (l.coefs.empty() || r.coefs.empty())) {
        const Affine& scaled = l.coefs.empty() ? r : l;
        if (scale_into(scaled, l.coefs.empty() ? l.constant : r.constant, &a)) return a;
        break;
      }
      break;
    }
    default:
      break;
  }
  a.ok = false;
  return a;
}

// Whether an expression is integer arithmetic on integer literals and iterators (a float literal
// compared with an index would be truncated by the interval and affine views).
bool integer_valued(const AstNode& n) {
  switch (n.kind) {
    case AstKind::kNumber:
      return n.is_integer;
    case AstKind::kIter:
      return true;
    case AstKind::kUnary:
    case AstKind::kBinary:
      if (n.op == AstOp::kDiv) return false;
      return std::all_of(n.args.begin(), n.args.end(),
                         [](const AstPtr& a) { return integer_valued(*a); });
    default:
      return false;
  }
}

// Whether two affine forms have the same iterator terms (they differ by a constant at most).
bool same_terms(const Affine& a, const Affine& b) {
  auto covered = [](const Affine& x, const Affine& y) {
    for (const auto& [name, c] : x.coefs) {
      auto it = y.coefs.find(name);
      if (c != (it == y.coefs.end() ? 0 : it->second)) return false;
    }
    return true;
  };
  return covered(a, b) && covered(b, a);
}

struct Interval {
  int64_t lo, hi;
};

int64_t floordiv_i(int64_t a, int64_t b) { return ir::floordiv_int(a, b); }

// The hull of op(x, y) over the four corners of a and b (exact for +, - and * of intervals);
// nullopt when a corner overflows int64 (literals are user text).
template <typename Op>
std::optional<Interval> checked(const Interval& a, const Interval& b, Op op) {
  int64_t p[4];
  const int64_t xs[4] = {a.lo, a.lo, a.hi, a.hi}, ys[4] = {b.lo, b.hi, b.lo, b.hi};
  for (int i = 0; i < 4; ++i) {
    if (op(xs[i], ys[i], &p[i])) return std::nullopt;
  }
  return Interval{*std::min_element(p, p + 4), *std::max_element(p, p + 4)};
}

class ShapeInference {
 public:
  ShapeInference(const Program& p, const std::map<std::string, std::vector<Expr>>& inputs,
                 const ExtentHints& hints)
      : p_(p), hints_(hints) {
    for (const std::string& name : p.inputs) {
      auto it = inputs.find(name);
      if (it == inputs.end()) {
        fail(p.first_use.at(name), "no shape was given for the input " + name);
      }
      int nd = p.ndim.at(name);
      if (static_cast<int>(it->second.size()) != nd) {
        fail(p.first_use.at(name), name + " is read with " + std::to_string(nd) + " ind" +
                                       (nd == 1 ? "ex" : "ices") + " but the given tensor has " +
                                       std::to_string(it->second.size()) + " dim" +
                                       (it->second.size() == 1 ? "" : "s"));
      }
      out_.shapes[name] = it->second;
    }
    check_hint_names();
  }

  ProgramShapes run() {
    for (size_t si = 0; si < p_.statements.size(); ++si) statement(p_.statements[si]);
    return std::move(out_);
  }

 private:
  [[noreturn]] void fail(size_t offset, const std::string& msg) const {
    throw ExpressionError(p_.source, offset, msg);
  }
  std::string where(size_t offset) const { return describe_position(p_.source, offset); }

  void check_hint_names() const {
    for (const auto& [name, shape] : hints_.tensors) {
      auto def = p_.defined_by.find(name);
      if (def == p_.defined_by.end()) {
        std::string why = p_.ndim.count(name) ? " is an input; its shape comes from the tensor"
                                              : " is not a tensor defined by the expression";
        throw ExpressionError(p_.source, ExpressionError::kNoOffset, "shapes: " + name + why);
      }
      const Statement& s = p_.statements[def->second];
      if (shape.size() != s.indices.size()) {
        fail(s.target_offset, "shapes: " + name + " is given " + std::to_string(shape.size()) +
                                  " sizes but has " + std::to_string(s.indices.size()) +
                                  " indices");
      }
    }
    for (const auto& [name, extent] : hints_.iterators) {
      bool found = false;
      for (const Statement& s : p_.statements) {
        std::vector<std::string> its = mentioned_iterators(*s.rhs);
        found |= std::find(its.begin(), its.end(), name) != its.end() ||
                 std::find(s.indices.begin(), s.indices.end(), name) != s.indices.end();
      }
      if (!found) {
        throw ExpressionError(p_.source, ExpressionError::kNoOffset,
                              "shapes: " + name +
                                  " is not an iterator or defined tensor of "
                                  "the expression");
      }
    }
  }

  struct Known {
    Expr extent;
    std::string origin;  // for messages: where the extent came from
  };

  void set_extent(const std::string& it, Expr extent, std::string origin, size_t offset) {
    auto found = known_.find(it);
    if (found == known_.end()) {
      known_[it] = {std::move(extent), std::move(origin)};
      return;
    }
    const Expr& prev = found->second.extent;
    if (prev->is_const_int() && extent->is_const_int() && prev->int_value != extent->int_value) {
      fail(offset, "iterator " + it + " has extent " + std::to_string(extent->int_value) +
                       " here (" + origin + ") but " + std::to_string(prev->int_value) + " from " +
                       found->second.origin);
    }
  }

  std::string dim_text(const IndexUse& u) const {
    return "dim " + std::to_string(u.dim) + " of " + u.access->name;
  }

  void statement(const Statement& s) {
    known_.clear();
    std::vector<std::string> mentioned = s.indices;
    for (const std::string& it : mentioned_iterators(*s.rhs)) {
      if (std::find(mentioned.begin(), mentioned.end(), it) == mentioned.end())
        mentioned.push_back(it);
    }
    // 1. explicit extents.
    auto th = hints_.tensors.find(s.target);
    if (th != hints_.tensors.end()) {
      for (size_t d = 0; d < s.indices.size(); ++d) {
        check_positive(th->second[d], s.index_offsets[d], s.indices[d]);
        known_[s.indices[d]] = {ir::int_imm(th->second[d]), "shapes={'" + s.target + "': ...}"};
      }
    }
    for (const std::string& it : mentioned) {
      auto h = hints_.iterators.find(it);
      if (h == hints_.iterators.end()) continue;
      check_positive(h->second, s.target_offset, it);
      set_extent(it, ir::int_imm(h->second), "shapes={'" + it + "': ...}", s.target_offset);
    }
    // 2. plain uses.
    std::vector<IndexUse> uses;
    collect_index_uses(*s.rhs, &uses);
    for (const IndexUse& u : uses) {
      if (u.index->kind != AstKind::kIter) continue;
      const Expr& dim = out_.shapes.at(u.access->name)[u.dim];
      set_extent(u.index->name, dim, dim_text(u) + " at " + where(u.index->offset),
                 u.index->offset);
    }
    // 3. affine uses with a single unknown iterator, until nothing changes.
    while (solve_affine(uses)) {
    }
    // 4. whatever is left is an error.
    for (const std::string& it : mentioned) {
      if (known_.count(it)) continue;
      auto pos = std::find(s.indices.begin(), s.indices.end(), it);
      std::vector<std::string> rhs_its = mentioned_iterators(*s.rhs);
      bool in_rhs = std::find(rhs_its.begin(), rhs_its.end(), it) != rhs_its.end();
      if (pos != s.indices.end() && !in_rhs) {
        fail(s.index_offsets[pos - s.indices.begin()],
             "iterator " + it +
                 " appears only in the output, so its extent is unknown; give it "
                 "with shapes={'" +
                 it + "': N}");
      }
      fail(first_mention(*s.rhs, it),
           "cannot infer the extent of iterator " + it +
               ": it is never a plain index of a "
               "tensor and its index expressions do not determine it; give it with shapes={'" +
               it + "': N}");
    }
    for (auto& [it, k] : known_) {
      if (!k.extent->is_const_int()) k.extent = ir::simplify(k.extent);
      if (k.extent->is_const_int() && k.extent->int_value <= 0) {
        fail(mention_offset(s, it), "iterator " + it + " gets extent " +
                                        std::to_string(k.extent->int_value) + " from " + k.origin +
                                        "; empty or too small tensors are not supported");
      }
    }
    check_bounds(uses);
    std::map<std::string, Expr> extents;
    for (auto& [it, k] : known_) extents[it] = k.extent;
    std::vector<Expr> shape;
    for (const std::string& idx : s.indices) shape.push_back(extents.at(idx));
    out_.shapes[s.target] = shape;
    out_.extents.push_back(std::move(extents));
  }

  void check_positive(int64_t v, size_t offset, const std::string& it) const {
    if (v <= 0)
      fail(offset, "shapes: the extent of " + it + " must be positive, got " + std::to_string(v));
  }

  // Where an iterator is first written in a statement (output indices first).
  size_t mention_offset(const Statement& s, const std::string& it) const {
    for (size_t d = 0; d < s.indices.size(); ++d) {
      if (s.indices[d] == it) return s.index_offsets[d];
    }
    return first_mention(*s.rhs, it);
  }

  size_t first_mention(const AstNode& n, const std::string& it) const {
    if (n.kind == AstKind::kIter && n.name == it) return n.offset;
    if (n.kind == AstKind::kReduce) {
      for (size_t i = 0; i < n.reduce_iters.size(); ++i) {
        if (n.reduce_iters[i] == it) return n.reduce_iter_offsets[i];
      }
    }
    for (const AstPtr& a : n.args) {
      size_t o = first_mention(*a, it);
      if (o != ExpressionError::kNoOffset) return o;
    }
    return ExpressionError::kNoOffset;
  }

  bool solve_affine(const std::vector<IndexUse>& uses) {
    std::map<std::string, std::vector<std::pair<Expr, std::string>>> candidates;
    for (const IndexUse& u : uses) {
      if (u.index->kind == AstKind::kIter) continue;
      Affine a = affine_of(*u.index);
      if (!a.ok) continue;
      std::string unknown;
      int64_t coef = 0;
      int unknowns = 0;
      Expr max_rest = ir::int_imm(a.constant);
      for (const auto& [it, c] : a.coefs) {
        if (c == 0) continue;
        auto k = known_.find(it);
        if (k == known_.end()) {
          ++unknowns;
          unknown = it;
          coef = c;
        } else if (c > 0) {
          max_rest = max_rest + ir::int_imm(c) * (k->second.extent - ir::int_imm(1));
        }
      }
      if (unknowns != 1 || coef <= 0) continue;
      const Expr& dim = out_.shapes.at(u.access->name)[u.dim];
      // Largest e with coef * (e - 1) + max_rest <= dim - 1.
      Expr e = ir::floordiv(dim - ir::int_imm(1) - max_rest, ir::int_imm(coef)) + ir::int_imm(1);
      candidates[unknown].push_back(
          {e, "the index at " + where(node_begin(*u.index)) + " (" + dim_text(u) + ")"});
    }
    for (auto& [it, list] : candidates) {
      Expr e = list[0].first;
      std::string origin = list[0].second;
      for (size_t i = 1; i < list.size(); ++i) e = ir::min(e, list[i].first);
      known_[it] = {e, origin};
    }
    return !candidates.empty();
  }

  // An index's range, or an error where its integer arithmetic leaves int64: the kernel would
  // compute another index than the one written.
  std::optional<Interval> no_overflow(const AstNode& n, std::optional<Interval> r) const {
    if (!r) fail(n.offset, "integer arithmetic in this index overflows int64");
    return r;
  }

  std::optional<Interval> interval(const AstNode& n) const {
    switch (n.kind) {
      case AstKind::kNumber:
        return Interval{n.int_value, n.int_value};
      case AstKind::kIter: {
        const Expr& e = known_.at(n.name).extent;
        if (!e->is_const_int()) return std::nullopt;
        return Interval{0, e->int_value - 1};
      }
      case AstKind::kUnary: {
        auto a = interval(*n.args[0]);
        if (!a) return std::nullopt;
        return no_overflow(n, checked({0, 0}, *a, [](int64_t x, int64_t y, int64_t* r) {
                             return __builtin_sub_overflow(x, y, r);
                           }));
      }
      case AstKind::kCall: {  // max / min
        auto a = interval(*n.args[0]), b = interval(*n.args[1]);
        if (!a || !b) return std::nullopt;
        if (n.name == "max") return Interval{std::max(a->lo, b->lo), std::max(a->hi, b->hi)};
        return Interval{std::min(a->lo, b->lo), std::min(a->hi, b->hi)};
      }
      case AstKind::kBinary: {
        auto a = interval(*n.args[0]), b = interval(*n.args[1]);
        if (!a || !b) return std::nullopt;
        switch (n.op) {
          case AstOp::kAdd:
            return no_overflow(n, checked(*a, *b, [](int64_t x, int64_t y, int64_t* r) {
                                 return __builtin_add_overflow(x, y, r);
                               }));
          case AstOp::kSub:
            return no_overflow(n, checked(*a, *b, [](int64_t x, int64_t y, int64_t* r) {
                                 return __builtin_sub_overflow(x, y, r);
                               }));
          case AstOp::kMul:
            return no_overflow(n, checked(*a, *b, [](int64_t x, int64_t y, int64_t* r) {
                                 return __builtin_mul_overflow(x, y, r);
                               }));
          case AstOp::kFloorDiv: {
            if (b->lo <= 0 && b->hi >= 0) {
              fail(n.offset, "the divisor of this '//' can be zero");
            }
            int64_t p[4] = {floordiv_i(a->lo, b->lo), floordiv_i(a->lo, b->hi),
                            floordiv_i(a->hi, b->lo), floordiv_i(a->hi, b->hi)};
            return Interval{*std::min_element(p, p + 4), *std::max_element(p, p + 4)};
          }
          case AstOp::kMod: {
            if (b->lo <= 0) fail(n.offset, "the divisor of this '%' must be positive");
            if (b->lo == b->hi && a->lo >= 0 && a->hi < b->lo) return a;
            return Interval{0, b->hi - 1};
          }
          default:
            break;
        }
        return std::nullopt;
      }
      default:
        return std::nullopt;
    }
  }

  // Whether comparison `c` asserts index >= 0 (`lower`) or index < size (else) for the affine
  // index `ia`: one side of `c` is the index up to a constant (i > 0 bounds i - 1 from below),
  // the other a constant.
  bool asserts_bound(const AstNode& c, const Affine& ia, bool lower, int64_t size) const {
    if (!integer_valued(*c.args[0]) || !integer_valued(*c.args[1])) return false;
    for (int side = 0; side < 2; ++side) {
      const Affine la = affine_of(*c.args[side]);
      std::optional<Interval> k = interval(*c.args[1 - side]);
      if (!la.ok || !same_terms(la, ia) || !k || k->lo != k->hi) continue;
      // lhs op k with index = lhs + delta: index op k + delta.
      int64_t delta = 0, v = 0;
      if (__builtin_sub_overflow(ia.constant, la.constant, &delta) ||
          __builtin_add_overflow(k->lo, delta, &v)) {
        continue;
      }
      AstOp op = c.op;  // as `index op v`: flipped when the index is on the right
      if (side == 1) {
        op = op == AstOp::kLT   ? AstOp::kGT
             : op == AstOp::kLE ? AstOp::kGE
             : op == AstOp::kGT ? AstOp::kLT
             : op == AstOp::kGE ? AstOp::kLE
                                : op;
      }
      if (lower && ((op == AstOp::kGE && v >= 0) || (op == AstOp::kGT && v >= -1))) return true;
      if (!lower && ((op == AstOp::kLT && v <= size) || (op == AstOp::kLE && v < size))) {
        return true;
      }
    }
    return false;
  }

  // Whether the read's enclosing where(...) conditions keep `u`'s index within [0, size) where
  // the read is taken: a comparison of that index with a constant for each end it can pass.
  // (Code generation reads a where's branch only where its condition holds.)
  bool guarded(const IndexUse& u, const Interval& r, int64_t size) const {
    std::vector<const AstNode*> cs;
    for (const AstNode* g : u.guards) conjuncts(*g, &cs);
    const Affine ia = affine_of(*u.index);
    if (!ia.ok) return false;
    auto bounded = [&](bool lower) {
      return std::any_of(cs.begin(), cs.end(),
                         [&](const AstNode* c) { return asserts_bound(*c, ia, lower, size); });
    };
    return (r.lo >= 0 || bounded(true)) && (r.hi < size || bounded(false));
  }

  void check_bounds(const std::vector<IndexUse>& uses) const {
    for (const IndexUse& u : uses) {
      const Expr& dim = out_.shapes.at(u.access->name)[u.dim];
      if (!dim->is_const_int()) continue;
      std::optional<Interval> r = interval(*u.index);
      if (!r) continue;
      int64_t size = dim->int_value;
      if (r->lo >= 0 && r->hi < size) continue;
      if (guarded(u, *r, size)) continue;
      std::string msg = "this index of " + u.access->name + " ranges over [" +
                        std::to_string(r->lo) + ", " + std::to_string(r->hi) + "] but " +
                        dim_text(u) + " has size " + std::to_string(size) +
                        "; read it under a where(...) whose condition keeps this index in [0, " +
                        std::to_string(size) +
                        ") (e.g. where(i > 0, X[i - 1], 0.0)), or clamp "
                        "the index";
      fail(node_begin(*u.index), msg);
    }
  }

  const Program& p_;
  const ExtentHints& hints_;
  ProgramShapes out_;
  std::map<std::string, Known> known_;
};

}  // namespace

ProgramShapes infer_shapes(const Program& p,
                           const std::map<std::string, std::vector<Expr>>& input_shapes,
                           const ExtentHints& hints) {
  return ShapeInference(p, input_shapes, hints).run();
}

}  // namespace tessera::frontend
