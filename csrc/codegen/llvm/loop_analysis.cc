#include "codegen/llvm/loop_analysis.h"

#include <algorithm>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "ir/simplify.h"
#include "util/check.h"

namespace tessera::codegen {

using ir::Expr;
using ir::ExprKind;
using ir::ExprNode;
using loop::Stmt;
using loop::StmtKind;

bool expr_equal(const Expr& a, const Expr& b) {
  if (a.same_as(b)) return true;
  if (!a.defined() || !b.defined()) return false;
  if (a->kind != b->kind || a->dtype != b->dtype) return false;
  switch (a->kind) {
    case ExprKind::kIntImm:
      return a->int_value == b->int_value;
    case ExprKind::kFloatImm:
      return a->float_value == b->float_value ||
             (a->float_value != a->float_value && b->float_value != b->float_value);
    case ExprKind::kVar:
      return false;  // distinct nodes are distinct variables
    case ExprKind::kCall:
      if (a->call_op != b->call_op) return false;
      break;
    case ExprKind::kLoad:
      if (a->buffer != b->buffer) return false;
      break;
    case ExprKind::kAccess:
      if (a->tensor != b->tensor) return false;
      break;
    default:
      break;
  }
  if (a->operands.size() != b->operands.size()) return false;
  for (size_t i = 0; i < a->operands.size(); ++i) {
    if (!expr_equal(a->operands[i], b->operands[i])) return false;
  }
  return true;
}

namespace {

// Visits each distinct node of a DAG once (the shared visit_expr revisits shared subtrees).
void visit_unique(const Expr& e, std::unordered_set<const ExprNode*>& seen,
                  const std::function<void(const Expr&)>& f) {
  if (!e.defined() || !seen.insert(e.get()).second) return;
  f(e);
  for (const Expr& o : e->operands) visit_unique(o, seen, f);
}

bool mentions(const Expr& e, const ExprNode* var, const ir::VarMap& defs) {
  bool found = false;
  std::unordered_set<const ExprNode*> seen;
  visit_unique(e, seen, [&](const Expr& x) {
    if (x.get() == var) found = true;
    if (x->kind == ExprKind::kVar) {
      auto it = defs.find(x.get());
      if (it != defs.end() && mentions(it->second, var, defs)) found = true;
    }
  });
  return found;
}

}  // namespace

std::optional<int64_t> lane_stride(const Expr& e, const ExprNode* var, const ir::VarMap& defs) {
  if (!mentions(e, var, defs)) return 0;
  switch (e->kind) {
    case ExprKind::kVar: {
      if (e.get() == var) return 1;
      auto it = defs.find(e.get());
      if (it != defs.end()) return lane_stride(it->second, var, defs);
      return std::nullopt;
    }
    case ExprKind::kAdd:
    case ExprKind::kSub: {
      auto a = lane_stride(e->operands[0], var, defs);
      auto b = lane_stride(e->operands[1], var, defs);
      if (!a || !b) return std::nullopt;
      return e->kind == ExprKind::kAdd ? *a + *b : *a - *b;
    }
    case ExprKind::kMul: {
      const Expr& x = e->operands[0];
      const Expr& y = e->operands[1];
      if (x->kind == ExprKind::kIntImm) {
        auto s = lane_stride(y, var, defs);
        if (s) return *s * x->int_value;
      } else if (y->kind == ExprKind::kIntImm) {
        auto s = lane_stride(x, var, defs);
        if (s) return *s * y->int_value;
      }
      return std::nullopt;
    }
    case ExprKind::kCast:
      // Integer widening/narrowing of an affine index keeps its stride (indices never wrap).
      if (ir::is_int(e->dtype) && ir::is_int(e->operands[0]->dtype)) {
        return lane_stride(e->operands[0], var, defs);
      }
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

bool contains_load(const Expr& e) {
  bool found = false;
  std::unordered_set<const ExprNode*> seen;
  visit_unique(e, seen, [&](const Expr& x) { found |= x->kind == ExprKind::kLoad; });
  return found;
}

namespace {

// An unrolled loop inside the vectorized body: each of its copies binds `var` to min + c.
struct InnerLoop {
  const ExprNode* var;
  Expr min;
  int64_t extent;
};

struct Access {
  const ir::BufferNode* buffer;
  Expr index;  // with Let definitions substituted
  bool is_store;
  std::vector<InnerLoop> inner;  // enclosing unrolled loops whose variables `index` mentions
};

// Largest number of unrolled copies of one access the dependence test enumerates.
constexpr int64_t kMaxCopies = 1024;

class VectorBodyChecker {
 public:
  VectorBodyChecker(const ir::Var& var, int64_t lanes) : var_(var), lanes_(lanes) {}

  bool run(const Stmt& body, std::string* why) {
    if (!walk(body)) {
      if (why) *why = why_;
      return false;
    }
    std::unordered_map<const ir::BufferNode*, std::vector<const Access*>> by_buffer;
    std::vector<const ir::BufferNode*> order;
    for (const Access& a : accesses_) {
      auto& list = by_buffer[a.buffer];
      if (list.empty()) order.push_back(a.buffer);
      list.push_back(&a);
    }
    for (const ir::BufferNode* buf : order) {
      const auto& accs = by_buffer[buf];
      int stores = 0, loads = 0;
      for (const Access* a : accs) (a->is_store ? stores : loads)++;
      if (stores == 0) continue;
      if (single_index_disjoint(accs)) continue;
      // One store and no reads: lanes write in order (scatter order), like the iterations.
      if (loads == 0 && stores == 1 && accs[0]->inner.empty()) continue;
      if (unrolled_copies_disjoint(accs)) continue;
      if (why) {
        *why = "buffer " + buf->name +
               " is written at indices that may overlap across lanes or be read elsewhere";
      }
      return false;
    }
    return true;
  }

 private:
  // Fast path: every access uses the same index expression with a non-zero constant stride, so
  // each lane only ever touches its own element.
  bool single_index_disjoint(const std::vector<const Access*>& accs) const {
    const Expr& idx = accs[0]->index;
    for (const Access* a : accs) {
      if (!a->inner.empty() || !expr_equal(a->index, idx)) return false;
    }
    auto s = lane_stride(idx, var_.get(), {});
    return s && *s != 0;
  }

  // General test. Unrolled loops inside the body make one access into several copies, each
  // with index base_c + stride*lane. Lane-wise execution reorders copy-major vs lane-major, which
  // is only visible when an element written by one lane is touched by another lane. Lanes l, l'
  // of two copies meet when base_a - base_b = stride*(l' - l), so every pair of copies must have
  // a constant base difference d that is 0 (same lane), not a multiple of the stride, or at
  // least stride*lanes apart.
  bool unrolled_copies_disjoint(const std::vector<const Access*>& accs) const {
    std::optional<int64_t> stride;
    std::vector<Expr> indices;
    for (const Access* a : accs) {
      if (!expand(*a, &indices) || indices.size() > static_cast<size_t>(kMaxCopies) * 4) {
        return false;
      }
    }
    for (const Expr& idx : indices) {
      auto s = lane_stride(idx, var_.get(), {});
      if (!s || *s == 0 || (stride && *s != *stride)) return false;
      stride = s;
    }
    std::vector<int64_t> offsets;
    for (const Expr& idx : indices) {
      if (idx->dtype != indices[0]->dtype) return false;
      Expr diff = ir::simplify(ir::sub(idx, indices[0]));
      if (!diff->is_const_int()) return false;
      offsets.push_back(diff->int_value);
    }
    int64_t span = *stride * lanes_;
    if (span < 0) span = -span;
    for (size_t a = 0; a < offsets.size(); ++a) {
      for (size_t b = a + 1; b < offsets.size(); ++b) {
        int64_t d = offsets[a] - offsets[b];
        if (d != 0 && d % *stride == 0 && (d < 0 ? -d : d) < span) return false;
      }
    }
    return true;
  }

  // Appends the index of every unrolled copy of `a` (false when there are too many).
  bool expand(const Access& a, std::vector<Expr>* out) const {
    int64_t copies = 1;
    for (const InnerLoop& l : a.inner) {
      copies *= std::max<int64_t>(l.extent, 1);
      if (copies > kMaxCopies) return false;
    }
    for (int64_t c = 0; c < copies; ++c) {
      ir::VarMap m;
      int64_t rest = c;
      for (const InnerLoop& l : a.inner) {
        int64_t e = std::max<int64_t>(l.extent, 1);
        m[l.var] = ir::add(l.min, ir::int_imm(rest % e, l.min->dtype));
        rest /= e;
      }
      out->push_back(ir::substitute(a.index, m));
    }
    return true;
  }

  void record(const ir::Buffer& b, const Expr& index, bool is_store) {
    Expr idx = ir::substitute(index, defs_);
    std::vector<InnerLoop> inner;
    for (const InnerLoop& l : inner_) {
      if (mentions(idx, l.var, {})) inner.push_back(l);
    }
    accesses_.push_back({b.get(), idx, is_store, std::move(inner)});
  }

  void record_loads(const Expr& e) {
    if (!e.defined()) return;
    std::unordered_set<const ExprNode*> seen;
    visit_unique(e, seen, [&](const Expr& x) {
      if (x->kind == ExprKind::kLoad) record(x->buffer, x->operands[0], false);
    });
  }

  bool walk(const Stmt& s) {
    switch (s->kind) {
      case StmtKind::kNop:
        return true;
      case StmtKind::kSeq:
        for (const Stmt& c : s->seq) {
          if (!walk(c)) return false;
        }
        return true;
      case StmtKind::kStore:
        record_loads(s->index);
        record_loads(s->value);
        record(s->buffer, s->index, true);
        return true;
      case StmtKind::kPrefetch:  // reads nothing the loop depends on
        record_loads(s->index);
        return true;
      case StmtKind::kLet: {
        record_loads(s->value);
        defs_[s->var.get()] = ir::substitute(s->value, defs_);
        bool ok = walk(s->body);
        defs_.erase(s->var.get());
        return ok;
      }
      case StmtKind::kIf:
        record_loads(s->cond);
        return walk(s->then_case) && (!s->else_case || walk(s->else_case));
      case StmtKind::kFor: {
        Expr min = ir::substitute(s->min, defs_);
        if (s->for_kind == loop::ForKind::kUnrolled && s->extent->is_const_int() &&
            s->extent->int_value <= kMaxFullUnroll && !ir::uses_var(min, var_)) {
          record_loads(s->min);
          inner_.push_back({s->var.get(), min, s->extent->int_value});
          bool ok = walk(s->body);
          inner_.pop_back();
          return ok;
        }
        why_ = "a nested loop that is not a constant-extent unrolled loop";
        return false;
      }
      case StmtKind::kAllocate:
        why_ = "an allocation inside the vectorized body";
        return false;
      case StmtKind::kParallelCall:
        why_ = "a parallel call inside the vectorized body";
        return false;
    }
    why_ = "an unknown statement";
    return false;
  }

  ir::Var var_;
  int64_t lanes_;
  ir::VarMap defs_;
  std::vector<InnerLoop> inner_;
  std::vector<Access> accesses_;
  std::string why_;
};

}  // namespace

bool can_vectorize_body(const Stmt& body, const ir::Var& var, int64_t lanes, std::string* why) {
  try {
    return VectorBodyChecker(var, lanes).run(body, why);
  } catch (const Error& e) {
    // Malformed index arithmetic (e.g. mixed integer types) is reported when the scalar loop is
    // emitted; here it only means "not provably safe to vectorize".
    if (why) *why = std::string("dependence analysis failed: ") + e.what();
    return false;
  }
}

UsedNames collect_used_names(const Stmt& root) {
  UsedNames out;
  std::unordered_set<const ExprNode*> seen_nodes;
  std::unordered_set<const ir::BufferNode*> seen_bufs;
  auto add_buffer = [&](const ir::Buffer& b) {
    if (b && seen_bufs.insert(b.get()).second) out.buffers.push_back(b);
  };
  auto add_expr = [&](const Expr& e) {
    visit_unique(e, seen_nodes, [&](const Expr& x) {
      if (x->kind == ExprKind::kVar) out.vars.push_back(x);
      if (x->kind == ExprKind::kLoad) add_buffer(x->buffer);
    });
  };
  std::function<void(const Stmt&)> walk = [&](const Stmt& s) {
    if (!s) return;
    switch (s->kind) {
      case StmtKind::kNop:
        break;
      case StmtKind::kSeq:
        for (const Stmt& c : s->seq) walk(c);
        break;
      case StmtKind::kStore:
        add_buffer(s->buffer);
        add_expr(s->index);
        add_expr(s->value);
        break;
      case StmtKind::kPrefetch:
        add_buffer(s->buffer);
        add_expr(s->index);
        break;
      case StmtKind::kLet:
        add_expr(s->var);
        add_expr(s->value);
        walk(s->body);
        break;
      case StmtKind::kIf:
        add_expr(s->cond);
        walk(s->then_case);
        walk(s->else_case);
        break;
      case StmtKind::kFor:
        add_expr(s->var);
        add_expr(s->min);
        add_expr(s->extent);
        walk(s->body);
        break;
      case StmtKind::kAllocate:
        add_buffer(s->buffer);
        for (const Expr& d : s->buffer->shape) add_expr(d);
        walk(s->body);
        break;
      case StmtKind::kParallelCall:
        add_expr(s->var);
        add_expr(s->min);
        add_expr(s->extent);
        break;
    }
  };
  walk(root);
  return out;
}

}  // namespace tessera::codegen
