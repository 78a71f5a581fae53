#include "layout/propagate.h"

#include "ir/functor.h"

namespace tessera::layout {

using ir::Expr;
using ir::Tensor;

namespace {

// Whether every read of `p` in `c`'s body is at `c`'s iterators, in order, and there is one.
bool reads_in_place(const Tensor& c, const Tensor& p) {
  if (c->op->reduce != ir::ReduceKind::kNone || c->shape.size() != p->shape.size()) return false;
  for (size_t d = 0; d < c->shape.size(); ++d) {
    if (!c->shape[d]->is_const_int() || !p->shape[d]->is_const_int() ||
        c->shape[d]->int_value != p->shape[d]->int_value) {
      return false;
    }
  }
  bool any = false, all = true;
  ir::visit_expr(c->op->body, [&](const Expr& e) {
    if (e->kind != ir::ExprKind::kAccess || e->tensor.get() != p.get()) return;
    any = true;
    for (size_t d = 0; d < e->operands.size(); ++d) {
      all = all && e->operands[d].same_as(c->op->axes[d].var);
    }
  });
  return any && all;
}

// For a compute reading a placeholder at a permutation of its own iterators (a transposed view
// of a kernel input), the reorder that stores it in the placeholder's order: q[k] = the
// iterator indexing the placeholder's dim k. Empty otherwise.
std::vector<int64_t> input_order(const Tensor& view) {
  const ir::Expr& body = view->op->body;
  if (view->op->reduce != ir::ReduceKind::kNone || body->kind != ir::ExprKind::kAccess ||
      !body->tensor->is_placeholder() || body->operands.size() != view->op->axes.size()) {
    return {};
  }
  std::vector<int64_t> q;
  for (const Expr& i : body->operands) {
    for (size_t a = 0; a < view->op->axes.size(); ++a) {
      if (i.same_as(view->op->axes[a].var)) q.push_back(static_cast<int64_t>(a));
    }
  }
  bool identity = true;
  for (size_t k = 0; k < q.size(); ++k) identity = identity && q[k] == static_cast<int64_t>(k);
  return q.size() == view->op->axes.size() && !identity ? q : std::vector<int64_t>{};
}

// Pads reading a transposed view of an input, stored in the input's order (see the header).
void pads_in_input_order(const std::vector<Tensor>& computes, LayoutMap* layouts) {
  for (const Tensor& c : computes) {
    if (c->op->tag != "pad" || layouts->count(c->name)) continue;
    const std::vector<Tensor> src = ir::direct_inputs(c);
    if (src.size() != 1 || src[0]->is_placeholder()) continue;
    const std::vector<int64_t> q = input_order(src[0]);
    if (q.empty() || q.size() != c->shape.size()) continue;
    std::vector<int64_t> shape;
    for (const Expr& d : c->shape) {
      if (!d->is_const_int()) return;
      shape.push_back(d->int_value);
    }
    layouts->emplace(c->name, Layout(shape, {Primitive::reorder(q)}));
  }
}

// The NHWC order of a convolution's output, and HWIO for its weight (see the header).
constexpr const char* kChannelsLast = "reorder(0,2,3,1)";
constexpr const char* kWeightHWIO = "reorder(2,3,1,0)";

// Weights the caller can relay, read by convolutions stored NHWC, laid out HWIO.
void weights_in_channel_order(const std::vector<Tensor>& computes,
                              const std::set<std::string>& relayable, LayoutMap* layouts) {
  for (const Tensor& c : computes) {
    auto l = layouts->find(c->name);
    if (c->op->tag != "conv2d" || l == layouts->end() || l->second.to_string() != kChannelsLast) {
      continue;
    }
    for (const Tensor& w : ir::direct_inputs(c)) {
      if (!w->is_placeholder() || !relayable.count(w->name) || layouts->count(w->name) ||
          w->shape.size() != 4) {
        continue;
      }
      std::vector<int64_t> shape;
      for (const Expr& d : w->shape) {
        if (!d->is_const_int()) break;
        shape.push_back(d->int_value);
      }
      if (shape.size() == 4) layouts->emplace(w->name, Layout::parse(shape, kWeightHWIO));
    }
  }
}

}  // namespace

LayoutMap propagate_layouts(const std::vector<Tensor>& outputs, LayoutMap layouts,
                            const std::set<std::string>& relayable_inputs) {
  const std::vector<Tensor> computes = ir::collect_dag(outputs).computes;
  pads_in_input_order(computes, &layouts);
  for (bool changed = true; changed;) {
    changed = false;
    for (const Tensor& c : computes) {
      for (const Tensor& p : ir::direct_inputs(c)) {
        if (p->is_placeholder() || !reads_in_place(c, p)) continue;
        const bool c_laid = layouts.count(c->name) > 0, p_laid = layouts.count(p->name) > 0;
        if (c_laid == p_laid) continue;
        const Layout& from = c_laid ? layouts.at(c->name) : layouts.at(p->name);
        layouts.emplace(c_laid ? p->name : c->name, from);
        changed = true;
      }
    }
  }
  weights_in_channel_order(computes, relayable_inputs, &layouts);
  return layouts;
}

}  // namespace tessera::layout
