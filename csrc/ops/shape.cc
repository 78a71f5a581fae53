#include "ops/shape.h"

#include <algorithm>

#include "ir/simplify.h"
#include "ops/elementwise.h"
#include "util/check.h"

namespace tessera::ops {

using ir::Expr;
using ir::Tensor;
using ir::Var;

namespace {
const char* kTag = "injective";
}  // namespace

Tensor permute(const Tensor& x, const std::vector<int64_t>& perm, const std::string& name) {
  TESSERA_CHECK(x != nullptr) << name << ": input is null";
  const int nd = x->ndim();
  TESSERA_CHECK(static_cast<int>(perm.size()) == nd)
      << name << ": permutation of " << perm.size() << " dims for " << x->name
      << shape_str(x->shape);
  std::vector<int64_t> p;
  for (int64_t a : perm) {
    int64_t n = normalize_axis(a, nd, name);
    TESSERA_CHECK(std::find(p.begin(), p.end(), n) == p.end())
        << name << ": dim " << a << " appears twice in the permutation";
    p.push_back(n);
  }
  Shape shape;
  for (int64_t d : p) shape.push_back(x->shape[d]);
  return ir::compute(
      name, shape,
      [&](const std::vector<Var>& v) {
        std::vector<Expr> idx(nd);
        for (int d = 0; d < nd; ++d) idx[p[d]] = v[d];
        return ir::access(x, idx);
      },
      kTag);
}

Tensor transpose(const Tensor& x, const std::vector<int64_t>& perm, const std::string& name) {
  return permute(x, perm, name);
}

Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1, const std::string& name) {
  TESSERA_CHECK(x != nullptr) << name << ": input is null";
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < x->ndim(); ++d) perm.push_back(d);
  std::swap(perm[normalize_axis(dim0, x->ndim(), name)],
            perm[normalize_axis(dim1, x->ndim(), name)]);
  return permute(x, perm, name);
}

Tensor reshape(const Tensor& x, const Shape& new_shape, const std::string& name) {
  TESSERA_CHECK(x != nullptr) << name << ": input is null";
  Shape shape = new_shape;
  const Expr in_numel = shape_numel(x->shape);
  // Infer a -1 dim from the element count.
  int infer = -1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (is_const_value(shape[d], -1)) {
      TESSERA_CHECK(infer < 0) << name << ": more than one -1 in " << shape_str(new_shape);
      infer = static_cast<int>(d);
    } else if (auto c = const_value(shape[d])) {
      TESSERA_CHECK(*c >= 0) << name << ": negative dim in " << shape_str(new_shape);
    }
  }
  if (infer >= 0) {
    Expr rest = ir::int_imm(1);
    for (size_t d = 0; d < shape.size(); ++d) {
      if (static_cast<int>(d) != infer) rest = rest * shape[d];
    }
    auto cn = const_value(in_numel), cr = const_value(rest);
    TESSERA_CHECK(!(cn && cr && (*cr == 0 || *cn % *cr != 0)))
        << name << ": cannot infer the -1 dim reshaping " << x->name << shape_str(x->shape)
        << " to " << shape_str(new_shape);
    shape[infer] = ir::floordiv(in_numel, rest);
  }
  auto cn = const_value(in_numel), co = const_value(shape_numel(shape));
  TESSERA_CHECK(!(cn && co && *cn != *co))
      << name << ": cannot reshape " << x->name << shape_str(x->shape) << " (" << *cn
      << " elements) to " << shape_str(shape) << " (" << *co << " elements)";
  return ir::compute(
      name, shape,
      [&](const std::vector<Var>& v) {
        // Row-major flat index of the output point ...
        Expr flat = ir::int_imm(0);
        for (size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + v[d];
        // ... decomposed into the input's dims: idx[d] = flat / stride[d] % extent[d]. The
        // simplifier folds the common cases (merging or splitting dims) back to plain iterators.
        const int nd = x->ndim();
        std::vector<Expr> idx(nd);
        Expr stride = ir::int_imm(1);
        for (int d = nd - 1; d >= 0; --d) {
          const Expr extent = x->shape[d];
          if (is_const_value(extent, 1)) {
            idx[d] = ir::int_imm(0);
          } else {
            Expr q = ir::floordiv(flat, stride);
            // The outermost dim needs no modulo: the flat index is in range.
            idx[d] = ir::simplify(d == 0 ? q : ir::floormod(q, extent));
          }
          stride = stride * extent;
        }
        return ir::access(x, idx);
      },
      kTag);
}

Tensor concat(const std::vector<Tensor>& xs, int64_t axis, const std::string& name) {
  TESSERA_CHECK(!xs.empty()) << name << ": no tensors to concatenate";
  for (const Tensor& t : xs) TESSERA_CHECK(t != nullptr) << name << ": null input";
  const Tensor& first = xs[0];
  const int nd = first->ndim();
  const int64_t ax = normalize_axis(axis, nd, name);
  std::vector<Expr> offsets;  // start of each input along the axis
  Expr total = ir::int_imm(0);
  for (const Tensor& t : xs) {
    check_same_dtype(first, t, name);
    TESSERA_CHECK(t->ndim() == nd)
        << name << ": " << t->name << shape_str(t->shape) << " and " << first->name
        << shape_str(first->shape) << " have different numbers of dims";
    for (int d = 0; d < nd; ++d) {
      if (d == ax) continue;
      check_dims_equal(t->shape[d], first->shape[d],
                       name + ": " + t->name + shape_str(t->shape) + " and " + first->name +
                           shape_str(first->shape) + " differ in dim " + std::to_string(d));
    }
    offsets.push_back(total);
    total = total + t->shape[ax];
  }
  Shape shape = first->shape;
  shape[ax] = total;
  return ir::compute(
      name, shape,
      [&](const std::vector<Var>& v) {
        auto read = [&](size_t k) {
          std::vector<Expr> idx(v.begin(), v.end());
          idx[ax] = v[ax] - offsets[k];
          return ir::access(xs[k], idx);
        };
        // select(i < end_0, X0[i], select(i < end_1, X1[i - off_1], ... X_last[i - off_last]))
        Expr value = read(xs.size() - 1);
        for (size_t k = xs.size() - 1; k-- > 0;) {
          value = ir::select(ir::lt(v[ax], offsets[k + 1]), read(k), value);
        }
        return value;
      },
      kTag);
}

Tensor slice(const Tensor& x, int64_t axis, int64_t start, int64_t end, int64_t step,
             const std::string& name) {
  TESSERA_CHECK(x != nullptr) << name << ": input is null";
  TESSERA_CHECK(step >= 1) << name << ": step must be >= 1, got " << step;
  const int64_t ax = normalize_axis(axis, x->ndim(), name);
  const Expr dim = x->shape[ax];
  Expr first, stop;
  if (auto c = const_value(dim)) {
    // Python slice semantics on a known extent.
    auto clamp = [&](int64_t v) {
      if (v < 0) v += *c;
      return std::min(std::max<int64_t>(v, 0), *c);
    };
    const int64_t s = clamp(start), e = end == kSliceEnd ? *c : clamp(end);
    first = ir::int_imm(s);
    stop = ir::int_imm(std::max(e, s));
  } else {
    first = start < 0 ? dim + start : ir::int_imm(start);
    stop = end == kSliceEnd ? dim : (end < 0 ? dim + end : ir::int_imm(end));
  }
  Shape shape = x->shape;
  shape[ax] = ir::floordiv(stop - first + (step - 1), ir::int_imm(step));
  return ir::compute(
      name, shape,
      [&](const std::vector<Var>& v) {
        std::vector<Expr> idx(v.begin(), v.end());
        idx[ax] = first + v[ax] * step;
        return ir::access(x, idx);
      },
      kTag);
}

Tensor pad(const Tensor& x, const std::vector<std::pair<int64_t, int64_t>>& pads, double value,
           const std::string& name) {
  TESSERA_CHECK(x != nullptr) << name << ": input is null";
  TESSERA_CHECK(static_cast<int>(pads.size()) == x->ndim())
      << name << ": " << pads.size() << " (before, after) pairs for " << x->name
      << shape_str(x->shape) << "; give one per dim";
  Shape shape = x->shape;
  for (size_t d = 0; d < pads.size(); ++d) {
    TESSERA_CHECK(pads[d].first >= 0 && pads[d].second >= 0)
        << name << ": negative padding in dim " << d;
    shape[d] = shape[d] + (pads[d].first + pads[d].second);
  }
  return ir::compute(
      name, shape,
      [&](const std::vector<Var>& v) {
        std::vector<Expr> idx, conds;
        for (size_t d = 0; d < pads.size(); ++d) {
          const int64_t before = pads[d].first;
          idx.push_back(v[d] - before);
          if (before > 0) conds.push_back(ir::ge(v[d], ir::int_imm(before)));
          if (pads[d].second > 0) conds.push_back(ir::lt(v[d], x->shape[d] + before));
        }
        return ir::select(and_all(conds), ir::access(x, idx), ir::make_const(x->dtype, value));
      },
      kTag);
}

Tensor broadcast_to(const Tensor& x, const Shape& shape, const std::string& name) {
  TESSERA_CHECK(x != nullptr) << name << ": input is null";
  TESSERA_CHECK(x->ndim() <= static_cast<int>(shape.size()))
      << name << ": cannot broadcast " << x->name << shape_str(x->shape) << " to fewer dims "
      << shape_str(shape);
  const size_t skip = shape.size() - x->shape.size();
  for (size_t d = 0; d < x->shape.size(); ++d) {
    if (is_const_value(x->shape[d], 1)) continue;
    check_dims_equal(
        x->shape[d], shape[skip + d],
        name + ": cannot broadcast " + x->name + shape_str(x->shape) + " to " + shape_str(shape));
  }
  return ir::compute(
      name, shape,
      [&](const std::vector<Var>& v) { return ir::access(x, broadcast_index(x, shape, v)); }, kTag);
}

}  // namespace tessera::ops
