#include "ops/common.h"

#include <sstream>

#include "util/check.h"

namespace tessera::ops {

using ir::Expr;
using ir::Tensor;

std::optional<int64_t> const_value(const Expr& e) {
  if (e.defined() && e->kind == ir::ExprKind::kIntImm) return e->int_value;
  return std::nullopt;
}

bool is_const_value(const Expr& e, int64_t v) {
  auto c = const_value(e);
  return c && *c == v;
}

namespace {
void print_dim(std::ostream& os, const Expr& e) {
  if (auto c = const_value(e)) {
    os << *c;
  } else if (e->kind == ir::ExprKind::kVar) {
    os << e->name;
  } else {
    os << "<expr>";  // the printer lives in ir/printer; a compound extent is rare in messages
  }
}
}  // namespace

std::string shape_str(const Shape& s) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) os << ", ";
    print_dim(os, s[i]);
  }
  os << "]";
  return os.str();
}

std::string ints_str(const std::vector<int64_t>& v) {
  std::ostringstream os;
  for (size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
  return os.str();
}

void check_dims_equal(const Expr& a, const Expr& b, const std::string& what) {
  auto ca = const_value(a), cb = const_value(b);
  TESSERA_CHECK(!(ca && cb && *ca != *cb)) << what << ": " << *ca << " vs " << *cb;
}

void check_ndim(const Tensor& t, int ndim, const std::string& op, const std::string& operand) {
  TESSERA_CHECK(t != nullptr) << op << ": operand " << operand << " is null";
  TESSERA_CHECK(t->ndim() == ndim)
      << op << ": " << operand << " (" << t->name << shape_str(t->shape) << ") must have " << ndim
      << " dims, has " << t->ndim();
}

void check_same_dtype(const Tensor& a, const Tensor& b, const std::string& op) {
  TESSERA_CHECK(a->dtype == b->dtype)
      << op << ": operand dtypes differ: " << a->name << " is " << ir::dtype_name(a->dtype) << ", "
      << b->name << " is " << ir::dtype_name(b->dtype) << " (cast one of them first)";
}

int64_t normalize_axis(int64_t axis, int ndim, const std::string& op) {
  TESSERA_CHECK(axis >= -ndim && axis < ndim)
      << op << ": axis " << axis << " out of range for a tensor with " << ndim << " dims";
  return axis < 0 ? axis + ndim : axis;
}

Expr shape_numel(const Shape& s) {
  Expr n = ir::int_imm(1);
  for (const Expr& d : s) n = n * d;
  return n;
}

namespace {
std::vector<ir::IterVar> make_iters(const Shape& extents, const std::vector<std::string>& names) {
  TESSERA_CHECK(names.size() == extents.size())
      << "internal: " << names.size() << " iterator names for " << extents.size() << " dims";
  std::vector<ir::IterVar> out;
  for (size_t i = 0; i < extents.size(); ++i)
    out.push_back(ir::make_iter_var(names[i], extents[i]));
  return out;
}

std::vector<ir::Var> vars_of(const std::vector<ir::IterVar>& ivs) {
  std::vector<ir::Var> v;
  for (const auto& iv : ivs) v.push_back(iv.var);
  return v;
}

Tensor finish(const std::string& name, std::shared_ptr<ir::ComputeOpNode> op) {
  TESSERA_CHECK(op->body.defined()) << "internal: " << name << " has no body";
  const ir::DType dt = op->body->dtype;
  return ir::make_tensor(name, std::move(op), dt);
}
}  // namespace

Tensor compute_named(const std::string& name, const Shape& shape,
                     const std::vector<std::string>& axis_names,
                     const std::function<Expr(const std::vector<ir::Var>&)>& f,
                     const std::string& tag, std::map<std::string, std::string> attrs) {
  if (axis_names.empty()) {
    Tensor t = ir::compute(name, shape, f, tag);
    return attrs.empty() ? t : ir::with_attrs(t, std::move(attrs));
  }
  auto op = std::make_shared<ir::ComputeOpNode>();
  op->name = name;
  op->tag = tag;
  op->attrs = std::move(attrs);
  op->axes = make_iters(shape, axis_names);
  op->body = f(vars_of(op->axes));
  return finish(name, std::move(op));
}

Tensor reduce_named(
    const std::string& name, const Shape& shape, const std::vector<std::string>& axis_names,
    const Shape& reduce_extents, const std::vector<std::string>& reduce_names, ir::ReduceKind kind,
    const std::function<Expr(const std::vector<ir::Var>&, const std::vector<ir::Var>&)>& f,
    const std::string& tag, std::map<std::string, std::string> attrs) {
  if (axis_names.empty() && reduce_names.empty()) {
    Tensor t = ir::reduce(name, shape, reduce_extents, kind, f, tag);
    return attrs.empty() ? t : ir::with_attrs(t, std::move(attrs));
  }
  TESSERA_CHECK(kind != ir::ReduceKind::kNone) << "internal: reduce_named needs a reduction kind";
  auto op = std::make_shared<ir::ComputeOpNode>();
  op->name = name;
  op->tag = tag;
  op->attrs = std::move(attrs);
  op->reduce = kind;
  op->axes = make_iters(shape, axis_names);
  op->reduce_axes = make_iters(reduce_extents, reduce_names);
  op->body = f(vars_of(op->axes), vars_of(op->reduce_axes));
  return finish(name, std::move(op));
}

Expr and_all(const std::vector<Expr>& conds) {
  Expr acc;
  for (const Expr& c : conds) {
    if (!c.defined() || (c->kind == ir::ExprKind::kIntImm && c->int_value != 0)) continue;
    acc = acc.defined() ? ir::logical_and(acc, c) : c;
  }
  return acc.defined() ? acc : ir::bool_imm(true);
}

}  // namespace tessera::ops

namespace tessera::ops {

namespace {
// Source index and validity condition of one padded/dilated dim.
std::pair<Expr, Expr> unpad_index(const Expr& i, const Expr& out_extent, const Expr& in_extent,
                                  const Expr& off, int64_t s) {
  Expr rel = i - off;
  std::vector<Expr> conds;
  // Lower bound: provably fine when there is no leading padding.
  auto c_off = const_value(off);
  if (!(c_off && *c_off <= 0)) conds.push_back(ir::ge(i, off));
  Expr src = rel;
  if (s > 1) {
    conds.push_back(ir::eq(ir::floormod(rel, ir::int_imm(s)), ir::int_imm(0)));
    src = ir::floordiv(rel, ir::int_imm(s));
  }
  // Upper bound: provably fine when the output ends before the data does.
  Expr last_src_plus_1 = ir::floordiv(out_extent - 1 - off, ir::int_imm(s)) + 1;
  auto c_last = const_value(last_src_plus_1), c_in = const_value(in_extent);
  if (!(c_last && c_in && *c_last <= *c_in)) {
    // Without dilation, compare the output index itself (h < H + off reads better).
    conds.push_back(s == 1 ? ir::lt(i, in_extent + off) : ir::lt(src, in_extent));
  }
  return {src, and_all(conds)};
}
}  // namespace

Tensor pad_spatial(const Tensor& x, const Expr& out_h, const Expr& out_w, const Expr& off_h,
                   const Expr& off_w, int64_t s_h, int64_t s_w, const Expr& value,
                   const std::string& name) {
  const int nd = x->ndim();
  TESSERA_CHECK(nd >= 2) << "pad_spatial: " << x->name << " needs 2 spatial dims";
  Shape shape = x->shape;
  shape[nd - 2] = out_h;
  shape[nd - 1] = out_w;
  std::vector<std::string> names;
  if (nd == 4) names = {"n", "c", "h", "w"};
  return compute_named(
      name, shape, names,
      [&](const std::vector<ir::Var>& v) {
        auto [src_h, cond_h] = unpad_index(v[nd - 2], out_h, x->shape[nd - 2], off_h, s_h);
        auto [src_w, cond_w] = unpad_index(v[nd - 1], out_w, x->shape[nd - 1], off_w, s_w);
        std::vector<Expr> idx(v.begin(), v.end());
        idx[nd - 2] = src_h;
        idx[nd - 1] = src_w;
        return ir::select(and_all({cond_h, cond_w}), ir::access(x, idx), ir::cast(x->dtype, value));
      },
      "pad");
}

}  // namespace tessera::ops
