// Structural hashing and equality, up to renaming of variables and tensors and permutation of
// summation iterators.
//
// Hash: variables are replaced by their role. Traversal iterators hash by axis position.
// Summation iterators hash by a signature that does not depend on their order or names: the
// sorted list of "paths" (node kinds, operand positions and tensor ids from the body's root) at
// which the iterator occurs, plus its extent. Two iterators get the same signature only when
// they occur in exactly the same places, so the hash of the body is invariant under any
// permutation of the reduce axes. Free variables (sizes) are numbered in the order of first use
// and hash with their bounds. Tensors hash by content (Merkle, producers inside) and by the
// order in which the traversal first meets them, so A[i]*A[i] and A[i]*B[i] differ.
//
// Equality: a simultaneous walk that builds bijections between variables, tensors and buffers.
// Summation iterators are matched by trying the permutations that keep signatures and extents
// equal (there are few iterators, and usually only one permutation fits).
#include "ir/structural_hash.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "ir/buffer.h"
#include "ir/functor.h"

namespace tessera::ir {

namespace {

uint64_t mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

uint64_t combine(uint64_t h, uint64_t v) {
  return mix(h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)));
}

uint64_t double_bits(double v) {
  uint64_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

// Distinct seeds per category keep e.g. "axis 0" and "free variable 0" apart.
enum Tag : uint64_t {
  kTagAxis = 0x61786973,
  kTagReduceAxis = 0x72617869,
  kTagFree = 0x66726565,
  kTagFreeUnnumbered = 0x66726575,
  kTagPlaceholder = 0x706c6163,
  kTagCompute = 0x636f6d70,
  kTagPath = 0x70617468,
  kTagBuffer = 0x62756666,
  kTagDag = 0x64616721,
};

// Beyond this many visited occurrences the path signatures fall back to the extent alone
// (still permutation invariant, just weaker); it only guards against bodies that are huge DAGs.
constexpr size_t kMaxPathVisits = 100000;

// Occurrence paths of the variables in `targets` within `body`. `access_key` names the tensor
// step of a path (the hasher uses tensor ids, the comparer only what is rename invariant).
template <typename AccessKey>
bool collect_paths(const Expr& body, const std::vector<const ExprNode*>& targets,
                   const AccessKey& access_key,
                   std::unordered_map<const ExprNode*, std::vector<uint64_t>>* out) {
  std::unordered_map<const ExprNode*, bool> is_target;
  for (const ExprNode* t : targets) is_target[t] = true;
  size_t visits = 0;
  std::vector<std::pair<const Expr*, uint64_t>> stack{{&body, kTagPath}};
  while (!stack.empty()) {
    auto [e, path] = stack.back();
    stack.pop_back();
    if (++visits > kMaxPathVisits) return false;
    const ExprNode& n = **e;
    if (n.kind == ExprKind::kVar) {
      if (is_target.count(&n)) (*out)[&n].push_back(path);
      continue;
    }
    uint64_t step = combine(static_cast<uint64_t>(n.kind), static_cast<uint64_t>(n.dtype));
    if (n.kind == ExprKind::kCall) step = combine(step, static_cast<uint64_t>(n.call_op));
    if (n.kind == ExprKind::kAccess) step = combine(step, access_key(n.tensor));
    for (size_t k = 0; k < n.operands.size(); ++k) {
      stack.push_back({&n.operands[k], combine(path, combine(step, k))});
    }
  }
  return true;
}

uint64_t sorted_list_hash(std::vector<uint64_t> v) {
  std::sort(v.begin(), v.end());
  uint64_t h = v.size();
  for (uint64_t x : v) h = combine(h, x);
  return h;
}

// ---------------------------------------------------------------------------------------------
class Hasher {
 public:
  uint64_t expr(const Expr& e) {
    auto it = memo_.find(e.get());
    if (it != memo_.end()) return it->second;
    uint64_t h = expr_uncached(e);
    memo_.emplace(e.get(), h);
    return h;
  }

  // Reference to a tensor from an access or an output list: position of first use + content.
  uint64_t tensor_ref(const Tensor& t) {
    auto it = tensors_.find(t.get());
    if (it != tensors_.end()) return combine(it->second.first, it->second.second);
    uint64_t id = tensors_.size();
    tensors_[t.get()] = {id, 0};
    uint64_t content = tensor_content(t);
    tensors_[t.get()].second = content;
    return combine(id, content);
  }

 private:
  uint64_t expr_uncached(const Expr& e) {
    const ExprNode& n = *e;
    uint64_t h = combine(static_cast<uint64_t>(n.kind), static_cast<uint64_t>(n.dtype));
    switch (n.kind) {
      case ExprKind::kIntImm:
        return combine(h, static_cast<uint64_t>(n.int_value));
      case ExprKind::kFloatImm:
        return combine(h, double_bits(n.float_value));
      case ExprKind::kVar:
        return combine(h, var_role(n));
      case ExprKind::kCall:
        h = combine(h, static_cast<uint64_t>(n.call_op));
        break;
      case ExprKind::kAccess:
        h = combine(h, tensor_ref(n.tensor));
        break;
      case ExprKind::kLoad:
        h = combine(h, buffer_ref(n.buffer));
        break;
      default:
        break;
    }
    for (const Expr& o : n.operands) h = combine(h, expr(o));
    return h;
  }

  uint64_t var_role(const ExprNode& v) {
    auto r = roles_.find(&v);
    if (r != roles_.end()) return r->second;
    uint64_t bounds = combine(combine(static_cast<uint64_t>(v.lo), static_cast<uint64_t>(v.hi)),
                              static_cast<uint64_t>(v.dtype));
    auto f = free_ids_.find(&v);
    if (f != free_ids_.end()) return combine(combine(kTagFree, f->second), bounds);
    if (!number_free_) return combine(kTagFreeUnnumbered, bounds);
    uint64_t id = free_ids_.size();
    free_ids_[&v] = id;
    return combine(combine(kTagFree, id), bounds);
  }

  uint64_t buffer_ref(const Buffer& b) {
    auto it = buffers_.find(b.get());
    uint64_t id;
    if (it != buffers_.end()) {
      id = it->second;
    } else {
      id = buffers_.size();
      buffers_[b.get()] = id;
    }
    uint64_t h = combine(combine(kTagBuffer, id), static_cast<uint64_t>(b->dtype));
    h = combine(h, static_cast<uint64_t>(b->scope));
    for (const Expr& s : b->shape) h = combine(h, expr(s));
    return h;
  }

  uint64_t tensor_content(const Tensor& t) {
    uint64_t h = combine(t->is_placeholder() ? kTagPlaceholder : kTagCompute,
                         static_cast<uint64_t>(t->dtype));
    h = combine(h, double_bits(t->pad_value));
    h = combine(h, t->shape.size());
    // A new scope: the roles and memoised hashes of the consumer do not apply in here.
    auto saved_roles = std::move(roles_);
    auto saved_memo = std::move(memo_);
    roles_.clear();
    memo_.clear();
    for (const Expr& s : t->shape) h = combine(h, expr(s));
    if (!t->is_placeholder()) h = combine(h, op_content(*t->op));
    roles_ = std::move(saved_roles);
    memo_ = std::move(saved_memo);
    return h;
  }

  uint64_t op_content(const ComputeOpNode& op) {
    uint64_t h = combine(static_cast<uint64_t>(op.reduce), op.axes.size());
    h = combine(h, op.reduce_axes.size());
    for (size_t i = 0; i < op.axes.size(); ++i) {
      roles_[op.axes[i].var.get()] = combine(kTagAxis, i);
      h = combine(h, expr(op.axes[i].extent));
    }
    // Give every tensor read by the body its id before signatures use them (body pre-order,
    // which does not depend on names or on the order of the reduce axes).
    visit_expr(op.body, [this](const Expr& x) {
      if (x->kind == ExprKind::kAccess) tensor_ref(x->tensor);
    });
    std::vector<const ExprNode*> rvars;
    for (const IterVar& iv : op.reduce_axes) rvars.push_back(iv.var.get());
    std::unordered_map<const ExprNode*, std::vector<uint64_t>> paths;
    bool have_paths = collect_paths(
        op.body, rvars, [this](const Tensor& t) { return tensor_ref(t); }, &paths);
    // Extents are hashed without numbering new size variables: the order of the reduce axes
    // must not decide which size gets which number.
    number_free_ = false;
    std::vector<uint64_t> sigs;
    for (const IterVar& iv : op.reduce_axes) {
      uint64_t sig = combine(kTagReduceAxis, expr(iv.extent));
      if (have_paths) sig = combine(sig, sorted_list_hash(paths[iv.var.get()]));
      sigs.push_back(sig);
    }
    number_free_ = true;
    for (size_t i = 0; i < op.reduce_axes.size(); ++i)
      roles_[op.reduce_axes[i].var.get()] = sigs[i];
    h = combine(h, sorted_list_hash(sigs));
    return combine(h, expr(op.body));
  }

  std::unordered_map<const ExprNode*, uint64_t> roles_;
  std::unordered_map<const ExprNode*, uint64_t> free_ids_;
  bool number_free_ = true;
  std::unordered_map<const TensorNode*, std::pair<uint64_t, uint64_t>> tensors_;
  std::unordered_map<const BufferNode*, uint64_t> buffers_;
  std::unordered_map<const ExprNode*, uint64_t> memo_;
};

// ---------------------------------------------------------------------------------------------
class Comparer {
 public:
  bool expr(const Expr& a, const Expr& b) {
    const ExprNode& x = *a;
    const ExprNode& y = *b;
    if (x.kind != y.kind || x.dtype != y.dtype || x.operands.size() != y.operands.size()) {
      return false;
    }
    switch (x.kind) {
      case ExprKind::kIntImm:
        return x.int_value == y.int_value;
      case ExprKind::kFloatImm:
        return double_bits(x.float_value) == double_bits(y.float_value);
      case ExprKind::kVar:
        return free_var(x, y);
      case ExprKind::kCall:
        if (x.call_op != y.call_op) return false;
        break;
      case ExprKind::kAccess:
        if (!tensor(x.tensor, y.tensor)) return false;
        break;
      case ExprKind::kLoad:
        if (!buffer(x.buffer, y.buffer)) return false;
        break;
      default:
        break;
    }
    for (size_t k = 0; k < x.operands.size(); ++k) {
      if (!expr(x.operands[k], y.operands[k])) return false;
    }
    return true;
  }

  bool tensor(const Tensor& a, const Tensor& b) {
    auto it = s_.tensors.find(a.get());
    if (it != s_.tensors.end()) return it->second == b.get();
    if (s_.tensors_rev.count(b.get())) return false;
    if (a->is_placeholder() != b->is_placeholder() || a->dtype != b->dtype ||
        double_bits(a->pad_value) != double_bits(b->pad_value) ||
        a->shape.size() != b->shape.size()) {
      return false;
    }
    for (size_t i = 0; i < a->shape.size(); ++i) {
      if (!expr(a->shape[i], b->shape[i])) return false;
    }
    if (!a->is_placeholder() && !op(*a->op, *b->op)) return false;
    s_.tensors[a.get()] = b.get();
    s_.tensors_rev[b.get()] = a.get();
    return true;
  }

 private:
  struct State {
    std::unordered_map<const ExprNode*, const ExprNode*> vars, vars_rev;
    std::unordered_map<const TensorNode*, const TensorNode*> tensors, tensors_rev;
    std::unordered_map<const BufferNode*, const BufferNode*> buffers, buffers_rev;
  };

  // A variable seen for the first time pairs with its counterpart if their bounds agree.
  bool free_var(const ExprNode& x, const ExprNode& y) {
    auto it = s_.vars.find(&x);
    if (it != s_.vars.end()) return it->second == &y;
    if (s_.vars_rev.count(&y)) return false;
    if (x.lo != y.lo || x.hi != y.hi) return false;
    s_.vars[&x] = &y;
    s_.vars_rev[&y] = &x;
    return true;
  }

  // Iterators pair by position/permutation; their extents are compared instead of bounds.
  bool bind_iter(const IterVar& a, const IterVar& b) {
    auto it = s_.vars.find(a.var.get());
    if (it != s_.vars.end()) return it->second == b.var.get();
    if (s_.vars_rev.count(b.var.get())) return false;
    if (a.var->dtype != b.var->dtype || !expr(a.extent, b.extent)) return false;
    s_.vars[a.var.get()] = b.var.get();
    s_.vars_rev[b.var.get()] = a.var.get();
    return true;
  }

  bool buffer(const Buffer& a, const Buffer& b) {
    auto it = s_.buffers.find(a.get());
    if (it != s_.buffers.end()) return it->second == b.get();
    if (s_.buffers_rev.count(b.get())) return false;
    if (a->dtype != b->dtype || a->scope != b->scope || a->shape.size() != b->shape.size()) {
      return false;
    }
    for (size_t i = 0; i < a->shape.size(); ++i) {
      if (!expr(a->shape[i], b->shape[i])) return false;
    }
    s_.buffers[a.get()] = b.get();
    s_.buffers_rev[b.get()] = a.get();
    return true;
  }

  static std::vector<uint64_t> signatures(const ComputeOpNode& op) {
    std::vector<const ExprNode*> rvars;
    for (const IterVar& iv : op.reduce_axes) rvars.push_back(iv.var.get());
    std::unordered_map<const ExprNode*, std::vector<uint64_t>> paths;
    auto key = [](const Tensor& t) {
      return combine(t->shape.size(), static_cast<uint64_t>(t->dtype));
    };
    std::vector<uint64_t> sigs(rvars.size(), 0);
    if (!collect_paths(op.body, rvars, key, &paths)) return sigs;  // no pruning
    for (size_t i = 0; i < rvars.size(); ++i) sigs[i] = sorted_list_hash(paths[rvars[i]]);
    return sigs;
  }

  bool op(const ComputeOpNode& a, const ComputeOpNode& b) {
    if (a.reduce != b.reduce || a.axes.size() != b.axes.size() ||
        a.reduce_axes.size() != b.reduce_axes.size()) {
      return false;
    }
    for (size_t i = 0; i < a.axes.size(); ++i) {
      if (!bind_iter(a.axes[i], b.axes[i])) return false;
    }
    const size_t n = a.reduce_axes.size();
    if (n == 0) return expr(a.body, b.body);
    // Candidate partners of each reduce axis of `a`: the axes of `b` with the same signature.
    std::vector<uint64_t> sa = signatures(a), sb = signatures(b);
    std::vector<size_t> perm(n);
    std::vector<std::vector<size_t>> groups_a, groups_b;
    {
      std::vector<bool> used(n, false);
      for (size_t i = 0; i < n; ++i) {
        if (used[i]) continue;
        std::vector<size_t> ga, gb;
        for (size_t j = i; j < n; ++j) {
          if (!used[j] && sa[j] == sa[i]) {
            used[j] = true;
            ga.push_back(j);
          }
        }
        for (size_t j = 0; j < n; ++j) {
          if (sb[j] == sa[i]) gb.push_back(j);
        }
        if (ga.size() != gb.size()) return false;
        groups_a.push_back(ga);
        groups_b.push_back(gb);  // sorted, the first permutation of each group
      }
    }
    // Odometer over the permutations of every group (capped: pathological bodies with many
    // interchangeable axes only get the first permutations tried).
    const State saved = s_;
    for (int attempt = 0; attempt < 40320; ++attempt) {
      bool ok = true;
      for (size_t g = 0; g < groups_a.size(); ++g) {
        for (size_t k = 0; k < groups_a[g].size(); ++k) perm[groups_a[g][k]] = groups_b[g][k];
      }
      for (size_t i = 0; i < n && ok; ++i) ok = bind_iter(a.reduce_axes[i], b.reduce_axes[perm[i]]);
      if (ok && expr(a.body, b.body)) return true;
      s_ = saved;
      size_t g = 0;
      for (; g < groups_b.size(); ++g) {
        if (std::next_permutation(groups_b[g].begin(), groups_b[g].end())) break;
        // wrapped around to sorted order: carry into the next group
      }
      if (g == groups_b.size()) break;
    }
    return false;
  }

  State s_;
};

}  // namespace

uint64_t structural_hash(const Expr& e) {
  Hasher h;
  return h.expr(e);
}

uint64_t structural_hash(const std::vector<Tensor>& outputs) {
  Hasher h;
  uint64_t r = combine(kTagDag, outputs.size());
  for (const Tensor& t : outputs) r = combine(r, h.tensor_ref(t));
  return r;
}

bool structural_equal(const Expr& a, const Expr& b) {
  Comparer c;
  return c.expr(a, b);
}

bool structural_equal(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return false;
  Comparer c;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!c.tensor(a[i], b[i])) return false;
  }
  return true;
}

}  // namespace tessera::ir
