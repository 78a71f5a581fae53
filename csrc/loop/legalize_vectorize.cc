#include "loop/legalize_vectorize.h"

#include <algorithm>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "ir/simplify.h"
#include "loop/lane_analysis.h"
#include "loop/stmt_functor.h"
#include "loop/unroll.h"
#include "util/check.h"

namespace tessera::loop {

namespace {

using ir::ExprKind;
using ir::ExprNode;

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

// Records every access of a vectorized body, or the first statement that rules lane-wise
// execution out.
class AccessCollector : public StmtVisitor {
 public:
  explicit AccessCollector(const Var& var) : var_(var) {}

  const std::vector<Access>& accesses() const { return accesses_; }
  const std::string& failure() const { return why_; }

  void visit(const Stmt& s) override {
    if (why_.empty()) StmtVisitor::visit(s);
  }

 protected:
  void visit_expr(const Expr& e) override { record_loads(e); }

  void visit_store(const Stmt& s) override {
    record_loads(s->index);
    record_loads(s->value);
    record(s->buffer, s->index, true);
  }

  void visit_let(const Stmt& s) override {
    record_loads(s->value);
    defs_[s->var.get()] = ir::substitute(s->value, defs_);
    visit(s->body);
    defs_.erase(s->var.get());
  }

  void visit_for(const Stmt& s) override {
    Expr min = ir::substitute(s->min, defs_);
    if (s->for_kind == ForKind::kUnrolled && s->extent->is_const_int() &&
        s->extent->int_value <= kMaxFullUnroll && !ir::uses_var(min, var_)) {
      record_loads(s->min);
      inner_.push_back({s->var.get(), min, s->extent->int_value});
      visit(s->body);
      inner_.pop_back();
      return;
    }
    why_ = "a nested loop that is not a constant-extent unrolled loop";
  }

  void visit_allocate(const Stmt&) override { why_ = "an allocation inside the vectorized body"; }
  void visit_parallel_call(const Stmt&) override {
    why_ = "a parallel call inside the vectorized body";
  }

 private:
  void record(const ir::Buffer& b, const Expr& index, bool is_store) {
    Expr idx = ir::substitute(index, defs_);
    std::vector<InnerLoop> inner;
    for (const InnerLoop& l : inner_) {
      if (mentions(idx, l.var, {})) inner.push_back(l);
    }
    accesses_.push_back({b.get(), idx, is_store, std::move(inner)});
  }

  void record_loads(const Expr& e) {
    std::unordered_set<const ExprNode*> seen;
    record_loads(e, seen);
  }

  // Each distinct node of the DAG once, parents before children.
  void record_loads(const Expr& e, std::unordered_set<const ExprNode*>& seen) {
    if (!e.defined() || !seen.insert(e.get()).second) return;
    if (e->kind == ExprKind::kLoad) record(e->buffer, e->operands[0], false);
    for (const Expr& o : e->operands) record_loads(o, seen);
  }

  Var var_;
  ir::VarMap defs_;
  std::vector<InnerLoop> inner_;
  std::vector<Access> accesses_;
  std::string why_;
};

// Whether lane-wise execution of the recorded accesses matches iteration order.
class DependenceTest {
 public:
  DependenceTest(const Var& var, int64_t lanes) : var_(var), lanes_(lanes) {}

  bool run(const std::vector<Access>& accesses, std::string* why) const {
    std::unordered_map<const ir::BufferNode*, std::vector<const Access*>> by_buffer;
    std::vector<const ir::BufferNode*> order;
    for (const Access& a : accesses) {
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
      *why = "buffer " + buf->name +
             " is written at indices that may overlap across lanes or be read elsewhere";
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
      if (!a->inner.empty() || !exact_equal(a->index, idx)) return false;
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

  Var var_;
  int64_t lanes_;
};

// Why the vectorized loop `s` may not run lane-wise ("" when it may).
std::string why_not_vectorizable(const Stmt& s) {
  if (!s->extent->is_const_int()) return "extent is not a constant";
  const int64_t lanes = s->extent->int_value;
  if (lanes < 2 || lanes > kMaxVectorLanes) {
    return "extent " + std::to_string(lanes) + " outside [2, " + std::to_string(kMaxVectorLanes) +
           "]";
  }
  try {
    AccessCollector collector(s->var);
    collector.visit(s->body);
    if (!collector.failure().empty()) return collector.failure();
    std::string why;
    return DependenceTest(s->var, lanes).run(collector.accesses(), &why) ? "" : why;
  } catch (const Error& e) {
    // Malformed index arithmetic (e.g. mixed integer types) is reported when the loop is
    // compiled; here it only means "not provably safe to vectorize".
    return std::string("dependence analysis failed: ") + e.what();
  }
}

class VectorLegalizer : public StmtMutator {
 public:
  explicit VectorLegalizer(std::vector<std::string>* notes) : notes_(notes) {}

 protected:
  Stmt mutate_for(const Stmt& s) override {
    if (s->for_kind != ForKind::kVectorized) return StmtMutator::mutate_for(s);
    const std::string why = why_not_vectorizable(s);
    // A legal body holds no loops but unrolled ones, so nothing inside needs legalising.
    if (why.empty()) return s;
    notes_->push_back("vectorized loop " + s->var->name + " runs as a scalar loop: " + why);
    return make_for(s->var, s->min, s->extent, ForKind::kSerial, mutate(s->body));
  }

 private:
  std::vector<std::string>* notes_;
};

}  // namespace

Stmt legalize_vectorized_loops(const Stmt& s, std::vector<std::string>* notes) {
  TESSERA_CHECK(notes != nullptr) << "legalize_vectorized_loops needs a place for its notes";
  return VectorLegalizer(notes).mutate(s);
}

}  // namespace tessera::loop
