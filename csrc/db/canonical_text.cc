// Canonical printer for compute DAGs (see canonical_text.h for the naming rules).
//
// Expressions print as prefix S-expressions, which need no precedence rules and are unambiguous.
// Nodes shared inside one expression (a DAG, e.g. after inlining) are printed once as a let
// binding, so the text stays linear in the DAG size instead of exponential in its depth.
#include "db/canonical_text.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <unordered_map>
#include <unordered_set>

#include "ir/buffer.h"

namespace tessera::db {

namespace {

using ir::Expr;
using ir::ExprKind;
using ir::ExprNode;

// Exact text of a double: hexadecimal floating point round-trips every value.
std::string exact_double(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  return buf;
}

std::string bound_text(int64_t v) {
  if (v == ir::kNoLowerBound) return "-inf";
  if (v == ir::kNoUpperBound) return "inf";
  return std::to_string(v);
}

std::string join(const std::vector<std::string>& parts, const char* sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

class Canonicalizer {
 public:
  CanonicalForm run(const std::vector<ir::Tensor>& outputs, const std::vector<ir::Tensor>& inputs) {
    const ir::TensorDAG dag = ir::collect_dag(outputs);
    // Ids: placeholders first, then computes producers-first. Both orders come from a traversal
    // of the DAG's structure (outputs order, body pre-order), never from names or addresses.
    for (const ir::Tensor& t : dag.placeholders) add_tensor(t);
    for (const ir::Tensor& t : dag.computes) add_tensor(t);
    for (const ir::Tensor& t : inputs) {
      if (!tensor_ids_.count(t.get())) add_tensor(t);  // an argument the outputs never read
    }
    form_.reduce_order.resize(form_.tensors.size());

    std::vector<std::string> lines;
    for (size_t id = 0; id < form_.tensors.size(); ++id) lines.push_back(tensor_line(id));

    std::vector<std::string> outs, ins, in_shapes, out_shapes;
    for (const ir::Tensor& t : outputs) {
      outs.push_back(tensor_name(t));
      out_shapes.push_back(shape_text(t));
    }
    for (const ir::Tensor& t : inputs) {
      ins.push_back(tensor_name(t));
      in_shapes.push_back(shape_text(t));
    }

    form_.shapes = join(in_shapes, ";") + "->" + join(out_shapes, ";");
    if (!size_decls_.empty()) form_.shapes += "|" + join(size_decls_, ",");

    std::string& text = form_.text;
    text = "tessera-workload-v1\n";
    text += "sizes: " + join(size_decls_, " ") + "\n";
    for (const std::string& b : buffer_decls_) text += b + "\n";
    for (const std::string& l : lines) text += l + "\n";
    text += "outputs: " + join(outs, " ") + "\n";
    text += "inputs: " + join(ins, " ") + "\n";
    return std::move(form_);
  }

 private:
  void add_tensor(const ir::Tensor& t) {
    tensor_ids_.emplace(t.get(), static_cast<int>(form_.tensors.size()));
    form_.tensors.push_back(t);
  }

  std::string tensor_name(const ir::Tensor& t) const {
    auto it = tensor_ids_.find(t.get());
    return it == tensor_ids_.end() ? "t?" : "t" + std::to_string(it->second);
  }

  std::string shape_text(const ir::Tensor& t) {
    std::vector<std::string> dims;
    for (const Expr& d : t->shape) dims.push_back(print(d));
    return std::string(ir::dtype_name(t->dtype)) + "[" + join(dims, ",") + "]";
  }

  std::string tensor_line(size_t id) {
    const ir::Tensor& t = form_.tensors[id];
    std::string line = "t" + std::to_string(id) + " = ";
    if (t->is_placeholder()) {
      line += "placeholder " + shape_text(t);
    } else {
      line += "compute " + shape_text(t);
    }
    line += " pad=" + exact_double(t->pad_value);
    if (t->is_placeholder()) return line;
    const ir::ComputeOpNode& op = *t->op;
    scope_vars_.clear();

    std::vector<std::string> axes;
    for (size_t i = 0; i < op.axes.size(); ++i) {
      const ir::IterVar& iv = op.axes[i];
      std::string name = "a" + std::to_string(i);
      axes.push_back(name + ":" + ir::dtype_name(iv.var->dtype) + "<" + print(iv.extent) + ">");
      scope_vars_[iv.var.get()] = name;
    }
    line += " axes(" + join(axes, ", ") + ")";

    if (!op.reduce_axes.empty() || op.reduce != ir::ReduceKind::kNone) {
      std::vector<int> order = reduce_order(op);
      std::vector<std::string> raxes;
      for (size_t k = 0; k < order.size(); ++k) {
        const ir::IterVar& iv = op.reduce_axes[order[k]];
        std::string name = "r" + std::to_string(k);
        raxes.push_back(name + ":" + ir::dtype_name(iv.var->dtype) + "<" + print(iv.extent) + ">");
        scope_vars_[iv.var.get()] = name;
      }
      line += std::string(" ") + ir::reduce_kind_name(op.reduce) + "(" + join(raxes, ", ") + ")";
      form_.reduce_order[id] = std::move(order);
    }
    line += " := " + print(op.body);
    scope_vars_.clear();
    return line;
  }

  // Summation iterators in order of first use in a pre-order walk of the body (unused ones last,
  // by extent). Independent of the order of op.reduce_axes, like the structural hash.
  std::vector<int> reduce_order(const ir::ComputeOpNode& op) {
    std::unordered_map<const ExprNode*, int> index;
    for (size_t i = 0; i < op.reduce_axes.size(); ++i) {
      index[op.reduce_axes[i].var.get()] = static_cast<int>(i);
    }
    std::vector<int> order;
    std::vector<bool> used(op.reduce_axes.size(), false);
    std::unordered_set<const ExprNode*> seen;
    std::vector<const ExprNode*> stack{op.body.get()};
    while (!stack.empty()) {
      const ExprNode* n = stack.back();
      stack.pop_back();
      if (!seen.insert(n).second) continue;
      if (n->kind == ExprKind::kVar) {
        auto it = index.find(n);
        if (it != index.end() && !used[it->second]) {
          used[it->second] = true;
          order.push_back(it->second);
        }
        continue;
      }
      for (auto it = n->operands.rbegin(); it != n->operands.rend(); ++it)
        stack.push_back(it->get());
    }
    std::vector<std::pair<std::string, int>> unused;
    for (size_t i = 0; i < op.reduce_axes.size(); ++i) {
      if (!used[i]) unused.push_back({print(op.reduce_axes[i].extent), static_cast<int>(i)});
    }
    std::stable_sort(unused.begin(), unused.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& u : unused) order.push_back(u.second);
    return order;
  }

  // ---- expressions ---------------------------------------------------------------------------
  // Expressions are printed from their hash-consed form: structurally identical subtrees get one
  // id whether or not the IR shares their nodes, so the text depends on the tree alone. A subtree
  // used more than once (by distinct parents, or twice by one) becomes a let binding.
  struct Consed {
    const ExprNode* node;  // a representative
    std::vector<int> children;
  };
  struct Lets {
    std::vector<Consed> nodes;
    std::unordered_map<std::string, int> ids;          // structural key -> consed id
    std::unordered_map<const ExprNode*, int> node_id;  // memo over the IR's own sharing
    std::vector<int> uses;
    std::unordered_map<int, int> bound;  // consed id -> let index
    std::vector<std::string> defs;
  };

  // Consed id of `n`. Leaves are keyed by identity (variables are compared by identity, and the
  // same variable must print the same way) or value; inner nodes by kind, type and children.
  static int cons(const ExprNode& n, Lets& lets) {
    auto memo = lets.node_id.find(&n);
    if (memo != lets.node_id.end()) return memo->second;
    std::vector<int> children;
    for (const Expr& o : n.operands) children.push_back(cons(*o, lets));
    std::string key = std::to_string(static_cast<int>(n.kind)) + ":" +
                      std::to_string(static_cast<int>(n.dtype)) + ":";
    switch (n.kind) {
      case ExprKind::kIntImm:
        key += std::to_string(n.int_value);
        break;
      case ExprKind::kFloatImm:
        key += exact_double(n.float_value);
        break;
      case ExprKind::kVar:
        key += "v" + std::to_string(reinterpret_cast<uintptr_t>(&n));
        break;
      case ExprKind::kCall:
        key += std::to_string(static_cast<int>(n.call_op));
        break;
      case ExprKind::kAccess:
        key += "t" + std::to_string(reinterpret_cast<uintptr_t>(n.tensor.get()));
        break;
      case ExprKind::kLoad:
        key += "b" + std::to_string(reinterpret_cast<uintptr_t>(n.buffer.get()));
        break;
      default:
        break;
    }
    for (int c : children) key += "," + std::to_string(c);
    auto [it, fresh] = lets.ids.emplace(key, static_cast<int>(lets.nodes.size()));
    if (fresh) {
      for (int c : children) {
        if (c >= static_cast<int>(lets.uses.size())) lets.uses.resize(c + 1, 0);
        ++lets.uses[c];
      }
      lets.nodes.push_back({&n, std::move(children)});
    }
    lets.node_id[&n] = it->second;
    return it->second;
  }

  std::string print(const Expr& root) {
    Lets lets;
    const int top = cons(*root, lets);
    lets.uses.resize(lets.nodes.size(), 0);
    std::string body = node_text(top, lets);
    if (lets.defs.empty()) return body;
    std::string out = "(let";
    for (size_t k = 0; k < lets.defs.size(); ++k) {
      out += " %" + std::to_string(k) + "=" + lets.defs[k];
    }
    return out + " in " + body + ")";
  }

  std::string node_text(int id, Lets& lets) {
    const ExprNode& n = *lets.nodes[id].node;
    if (n.operands.empty() && n.kind != ExprKind::kAccess && n.kind != ExprKind::kCall) {
      return leaf_text(n);
    }
    const bool shared = lets.uses[id] > 1;
    if (shared) {
      auto b = lets.bound.find(id);
      if (b != lets.bound.end()) return "%" + std::to_string(b->second);
    }
    std::string text = "(";
    switch (n.kind) {
      case ExprKind::kAccess:
        text += "access:" + std::string(ir::dtype_name(n.dtype)) + " " + tensor_name(n.tensor);
        break;
      case ExprKind::kLoad:
        text += "load:" + std::string(ir::dtype_name(n.dtype)) + " " + buffer_name(n.buffer);
        break;
      case ExprKind::kCall:
        text += std::string(ir::call_op_name(n.call_op)) + ":" + ir::dtype_name(n.dtype);
        break;
      default:
        text += std::string(ir::expr_kind_name(n.kind)) + ":" + ir::dtype_name(n.dtype);
        break;
    }
    for (int c : lets.nodes[id].children) text += " " + node_text(c, lets);
    text += ")";
    if (!shared) return text;
    const int k = static_cast<int>(lets.defs.size());
    lets.defs.push_back(std::move(text));
    lets.bound[id] = k;
    return "%" + std::to_string(k);
  }

  std::string leaf_text(const ExprNode& n) {
    switch (n.kind) {
      case ExprKind::kIntImm:
        if (n.dtype == ir::kIndexType) return std::to_string(n.int_value);
        return std::to_string(n.int_value) + ":" + ir::dtype_name(n.dtype);
      case ExprKind::kFloatImm:
        return exact_double(n.float_value) + ":" + ir::dtype_name(n.dtype);
      case ExprKind::kVar:
        return var_name(n);
      default:
        return std::string("(") + ir::expr_kind_name(n.kind) + ":" + ir::dtype_name(n.dtype) + ")";
    }
  }

  // Iterators of the current op by role; anything else is a symbolic size, numbered on first use
  // and declared with its range (the range is part of the workload: it bounds the shapes served).
  std::string var_name(const ExprNode& v) {
    auto s = scope_vars_.find(&v);
    if (s != scope_vars_.end()) return s->second;
    auto f = size_ids_.find(&v);
    if (f != size_ids_.end()) return "n" + std::to_string(f->second);
    const int id = static_cast<int>(size_ids_.size());
    size_ids_[&v] = id;
    const std::string name = "n" + std::to_string(id);
    size_decls_.push_back(name + "=" + ir::dtype_name(v.dtype) + "[" + bound_text(v.lo) + "," +
                          bound_text(v.hi) + "]");
    return name;
  }

  std::string buffer_name(const ir::Buffer& b) {
    auto it = buffer_ids_.find(b.get());
    if (it != buffer_ids_.end()) return "b" + std::to_string(it->second);
    const int id = static_cast<int>(buffer_ids_.size());
    buffer_ids_[b.get()] = id;
    const std::string name = "b" + std::to_string(id);
    std::vector<std::string> dims;
    for (const Expr& d : b->shape) dims.push_back(print(d));
    buffer_decls_.push_back(name + " = buffer " + ir::dtype_name(b->dtype) + "[" + join(dims, ",") +
                            "] " + ir::mem_scope_name(b->scope));
    return name;
  }

  CanonicalForm form_;
  std::unordered_map<const ir::TensorNode*, int> tensor_ids_;
  std::unordered_map<const ExprNode*, std::string> scope_vars_;
  std::unordered_map<const ExprNode*, int> size_ids_;
  std::vector<std::string> size_decls_;
  std::unordered_map<const ir::BufferNode*, int> buffer_ids_;
  std::vector<std::string> buffer_decls_;
};

}  // namespace

CanonicalForm canonicalize(const std::vector<ir::Tensor>& outputs,
                           const std::vector<ir::Tensor>& inputs) {
  return Canonicalizer().run(outputs, inputs);
}

}  // namespace tessera::db
