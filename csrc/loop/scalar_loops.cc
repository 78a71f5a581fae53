#include "loop/scalar_loops.h"

#include "loop/stmt_functor.h"

namespace tessera::loop {

namespace {

// Walks loops from the outside in; `found` is set by an innermost serial loop that stores with no
// vectorized loop inside.
class ScalarLoopFinder : public StmtVisitor {
 public:
  bool found = false;

 protected:
  void visit_for(const Stmt& s) override {
    if (found) return;
    const bool serial = s->for_kind == ForKind::kSerial;
    const int64_t serial_before = serial_loops_, vector_before = vector_loops_;
    const int64_t stores_before = stores_;
    ++(serial ? serial_loops_ : vector_loops_);
    in_vector_ += s->for_kind == ForKind::kVectorized;
    StmtVisitor::visit_for(s);
    in_vector_ -= s->for_kind == ForKind::kVectorized;
    // Lane-wise code is vectorised already; so is everything inside a vectorized loop.
    if (!serial || in_vector_ > 0 || stores_ == stores_before) return;
    if (serial_loops_ > serial_before + 1) return;  // not the innermost serial loop
    if (s->extent->is_const_int() && s->extent->int_value <= 1) return;
    // Scalar code LLVM's loop vectoriser can still vectorise: no vectorized loop inside.
    if (vector_loops_ == vector_before) found = true;
  }
  void visit_parallel_call(const Stmt& s) override {
    ++serial_loops_;  // the outlined body is visited on its own
    StmtVisitor::visit_parallel_call(s);
  }
  void visit_store(const Stmt& s) override {
    ++stores_;
    StmtVisitor::visit_store(s);
  }

 private:
  int64_t serial_loops_ = 0;  // serial loops (and parallel calls) entered so far
  int64_t vector_loops_ = 0;  // other loops entered so far
  int64_t stores_ = 0;        // stores seen so far
  int in_vector_ = 0;         // enclosing vectorized loops
};

class VectorizedLoopFinder : public StmtVisitor {
 public:
  bool found = false;

 protected:
  void visit_for(const Stmt& s) override {
    if (found) return;
    if (s->for_kind == ForKind::kVectorized) {
      found = true;
      return;
    }
    StmtVisitor::visit_for(s);
  }
};

}  // namespace

bool contains_vectorized_loop(const Stmt& s) {
  VectorizedLoopFinder finder;
  finder.visit(s);
  return finder.found;
}

bool has_scalar_inner_loops(const LoweredFunc& f) {
  ScalarLoopFinder finder;
  finder.visit(f.body);
  for (const OutlinedBody& o : f.outlined) finder.visit(o.body);
  return finder.found;
}

}  // namespace tessera::loop
