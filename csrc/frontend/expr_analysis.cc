#include "frontend/expr_analysis.h"

#include <algorithm>
#include <set>

#include "frontend/expr_error.h"

namespace tessera::frontend {

namespace {

class Analyzer {
 public:
  explicit Analyzer(Program* p) : p_(*p) {}

  void run() {
    for (size_t si = 0; si < p_.statements.size(); ++si) statement(static_cast<int>(si));
    // Every intermediate must feed a later statement: an unused one is almost surely a typo.
    for (size_t si = 0; si + 1 < p_.statements.size(); ++si) {
      const Statement& s = p_.statements[si];
      if (!read_.count(s.target)) {
        fail(s.target_offset, s.target + " is defined but never read; only the last statement (" +
                                  p_.output_name() + ") is the result");
      }
    }
  }

 private:
  [[noreturn]] void fail(size_t offset, const std::string& msg) const {
    throw ExpressionError(p_.source, offset, msg);
  }
  std::string where(size_t offset) const { return describe_position(p_.source, offset); }

  void statement(int si) {
    const Statement& s = p_.statements[si];
    auto def = p_.defined_by.find(s.target);
    if (def != p_.defined_by.end()) {
      fail(s.target_offset, s.target + " is defined twice (first at " +
                                where(p_.statements[def->second].target_offset) + ")");
    }
    auto use = p_.first_use.find(s.target);
    if (use != p_.first_use.end()) {
      fail(s.target_offset, s.target + " is read at " + where(use->second) +
                                " before this statement defines it; define tensors before "
                                "reading them");
    }
    current_ = si;
    bound_.clear();
    num_indices_ = s.indices.size();
    for (size_t i = 0; i < s.indices.size(); ++i) {
      for (size_t j = 0; j < i; ++j) {
        if (s.indices[j] == s.indices[i]) {
          fail(s.index_offsets[i], "index " + s.indices[i] + " appears twice in " + s.target +
                                       "[...]; use a different name per dimension");
        }
      }
      bound_.push_back({s.indices[i], s.index_offsets[i]});
    }
    value(*s.rhs);
    p_.defined_by[s.target] = si;
    p_.ndim[s.target] = static_cast<int>(s.indices.size());
  }

  const std::pair<std::string, size_t>* find_bound(const std::string& name) const {
    for (const auto& b : bound_) {
      if (b.first == name) return &b;
    }
    return nullptr;
  }

  void check_bound_iterator(const AstNode& n) const {
    if (find_bound(n.name)) return;
    const Statement& s = p_.statements[current_];
    std::string msg = "iterator " + n.name + " is not bound: it is not an index of " + s.target +
                      "[...] and no enclosing sum/max/min reduces over it";
    if (p_.ndim.count(n.name) || p_.first_use.count(n.name)) {
      msg = n.name + " is a tensor; read it with indices, as in " + n.name + "[...]";
    } else {
      msg += " (to reduce over it, write e.g. sum(" + n.name + ") ...)";
    }
    fail(n.offset, msg);
  }

  void access(const AstNode& n) {
    const Statement& s = p_.statements[current_];
    if (n.name == s.target) fail(n.offset, s.target + " cannot read itself in its definition");
    int nd = static_cast<int>(n.args.size());
    auto known = p_.ndim.find(n.name);
    if (known != p_.ndim.end() && known->second != nd) {
      auto def = p_.defined_by.find(n.name);
      std::string ref = def != p_.defined_by.end()
                            ? "is defined with " + std::to_string(known->second)
                            : "is read with " + std::to_string(known->second) + " at " +
                                  where(p_.first_use.at(n.name));
      fail(n.offset, n.name + " is read with " + std::to_string(nd) + " ind" +
                         (nd == 1 ? "ex" : "ices") + " here but " + ref);
    }
    if (!p_.first_use.count(n.name)) {
      p_.first_use[n.name] = n.offset;
      if (!p_.defined_by.count(n.name)) p_.inputs.push_back(n.name);
    }
    p_.ndim[n.name] = nd;
    read_.insert(n.name);
    for (const AstPtr& idx : n.args) index(*idx, n.name);
  }

  // An expression in value position: anything goes, bindings are checked.
  void value(const AstNode& n) {
    switch (n.kind) {
      case AstKind::kNumber:
        return;
      case AstKind::kIter:
        return check_bound_iterator(n);
      case AstKind::kAccess:
        return access(n);
      case AstKind::kReduce: {
        size_t mark = bound_.size();
        for (size_t i = 0; i < n.reduce_iters.size(); ++i) {
          if (const auto* b = find_bound(n.reduce_iters[i])) {
            std::string msg = "iterator " + n.reduce_iters[i] + " is already bound at " +
                              where(b->second) + "; reduce over a new name";
            // The usual cause: `sum(k) A[i, k] / sum(k) B[i, k]`, where the first body runs on.
            if (static_cast<size_t>(b - bound_.data()) >= num_indices_) {
              msg +=
                  ", or end the enclosing reduction's body with parentheses: (sum(k) ...) / "
                  "(sum(k) ...)";
            }
            fail(n.reduce_iter_offsets[i], msg);
          }
          bound_.push_back({n.reduce_iters[i], n.reduce_iter_offsets[i]});
        }
        value(*n.args[0]);
        bound_.resize(mark);
        return;
      }
      case AstKind::kCall:
      case AstKind::kUnary:
      case AstKind::kBinary:
        for (const AstPtr& a : n.args) value(*a);
        return;
    }
  }

  // An expression in an index of `tensor`: integer arithmetic on iterators and constants.
  void index(const AstNode& n, const std::string& tensor) {
    const std::string rule =
        "indices are integer expressions of iterators and integer constants (+ - * // % and "
        "max/min)";
    switch (n.kind) {
      case AstKind::kNumber:
        if (!n.is_integer)
          fail(n.offset, "the number in this index of " + tensor +
                             " is not an "
                             "integer; " +
                             rule);
        return;
      case AstKind::kIter:
        return check_bound_iterator(n);
      case AstKind::kAccess:
        fail(n.offset,
             "tensor values cannot be used as indices (data-dependent indexing is not "
             "supported); " +
                 rule);
      case AstKind::kReduce:
        fail(n.offset, "a reduction cannot be used as an index; " + rule);
      case AstKind::kCall:
        if (n.name != "max" && n.name != "min") {
          fail(n.offset, n.name + "() cannot be used in an index; " + rule);
        }
        break;
      case AstKind::kUnary:
        if (n.op != AstOp::kNeg) fail(n.offset, "'not' cannot be used in an index; " + rule);
        break;
      case AstKind::kBinary:
        if (n.op == AstOp::kDiv) {
          fail(n.offset, "'/' is true division; use '//' for integer division in indices");
        }
        if (n.op != AstOp::kAdd && n.op != AstOp::kSub && n.op != AstOp::kMul &&
            n.op != AstOp::kFloorDiv && n.op != AstOp::kMod) {
          fail(n.offset,
               std::string("'") + ast_op_symbol(n.op) + "' cannot be used in an index; " + rule);
        }
        break;
    }
    for (const AstPtr& a : n.args) index(*a, tensor);
  }

  Program& p_;
  int current_ = 0;
  // Bound iterators (name, offset of the binding): the output indices, then enclosing reductions'.
  std::vector<std::pair<std::string, size_t>> bound_;
  size_t num_indices_ = 0;
  std::set<std::string> read_;
};

void collect_iterators(const AstNode& n, std::vector<std::string>* out) {
  auto add = [&](const std::string& name) {
    if (std::find(out->begin(), out->end(), name) == out->end()) out->push_back(name);
  };
  if (n.kind == AstKind::kIter) add(n.name);
  if (n.kind == AstKind::kReduce) {
    for (const std::string& r : n.reduce_iters) add(r);
  }
  for (const AstPtr& a : n.args) collect_iterators(*a, out);
}

}  // namespace

void analyze_program(Program* p) { Analyzer(p).run(); }

std::vector<std::string> mentioned_iterators(const AstNode& node) {
  std::vector<std::string> out;
  collect_iterators(node, &out);
  return out;
}

}  // namespace tessera::frontend
