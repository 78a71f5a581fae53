#include "cost/access_region.h"

#include <algorithm>
#include <cmath>

#include "ir/functor.h"
#include "ir/linear_form.h"
#include "ir/simplify.h"
#include "util/check.h"

namespace tessera::cost {

using ir::Expr;

namespace {

int64_t clamp_tile(int64_t t, int64_t extent) { return std::max<int64_t>(1, std::min(t, extent)); }

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Saturating helpers: a span over unbounded variables must not overflow.
int64_t sat_add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return b > 0 ? ir::kNoUpperBound : ir::kNoLowerBound;
  return r;
}
int64_t sat_mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r))
    return (a > 0) == (b > 0) ? ir::kNoUpperBound : ir::kNoLowerBound;
  return r;
}

}  // namespace

AccessRegions::AccessRegions(std::vector<ir::Var> iters, std::vector<int64_t> extents,
                             int num_spatial)
    : iters_(std::move(iters)), extents_(std::move(extents)), num_spatial_(num_spatial) {
  TESSERA_CHECK(iters_.size() == extents_.size()) << "one extent per iterator";
  TESSERA_CHECK(num_spatial_ >= 0 && num_spatial_ <= static_cast<int>(iters_.size()))
      << "bad spatial iterator count";
  for (int64_t& e : extents_) e = std::max<int64_t>(1, e);
}

AccessRegions AccessRegions::for_compute(const ir::ComputeOpNode& op, const Expr& body,
                                         const ir::TensorNode* out, const Expr& epilogue,
                                         int64_t symbolic_guess,
                                         const std::vector<Expr>& out_point) {
  std::vector<ir::Var> iters;
  std::vector<int64_t> extents;
  for (const ir::IterVar& iv : op.axes) {
    iters.push_back(iv.var);
    extents.push_back(iv.extent->is_const_int() ? iv.extent->int_value : symbolic_guess);
  }
  for (const ir::IterVar& iv : op.reduce_axes) {
    iters.push_back(iv.var);
    extents.push_back(iv.extent->is_const_int() ? iv.extent->int_value : symbolic_guess);
  }
  AccessRegions ar(std::move(iters), std::move(extents), static_cast<int>(op.axes.size()));
  auto collect = [&](const Expr& e, bool epi) {
    ir::visit_expr(e, [&](const Expr& x) {
      if (x->kind == ir::ExprKind::kAccess) ar.add_access(x->tensor.get(), x->operands, epi);
    });
  };
  if (body.defined()) collect(body, false);
  if (epilogue.defined()) collect(epilogue, true);
  if (out) ar.add_output(out, out_point);
  return ar;
}

size_t AccessRegions::group_of(const ir::TensorNode* t) {
  for (size_t g = 0; g < tensors_.size(); ++g) {
    if (tensors_[g].tensor == t) return g;
  }
  TensorAccesses ta;
  ta.tensor = t;
  ta.name = t->name;
  ta.elem_bytes = ir::dtype_bytes(t->dtype);
  for (const Expr& d : t->shape) ta.shape.push_back(d->is_const_int() ? d->int_value : -1);
  tensors_.push_back(ta);
  groups_.emplace_back();
  return tensors_.size() - 1;
}

AccessRegions::IndexForm AccessRegions::analyze_index(const Expr& e) const {
  IndexForm f;
  f.expr = e;
  ir::LinearParseOptions opts;
  opts.distribute = false;
  ir::LinearForm lf = ir::to_linear(e, opts);
  if (lf.invalid) return f;
  std::vector<int64_t> coef(iters_.size(), 0);
  for (const ir::LinearTerm& term : lf.terms) {
    if (term.atoms.size() != 1) return f;
    auto it = std::find_if(iters_.begin(), iters_.end(),
                           [&](const ir::Var& v) { return v.same_as(term.atoms[0]); });
    if (it == iters_.end()) return f;  // size variables and other atoms: bound analysis
    coef[it - iters_.begin()] += term.coef;
  }
  f.affine = true;
  f.coef = std::move(coef);
  return f;
}

void AccessRegions::add_access(const ir::TensorNode* tensor, const std::vector<Expr>& indices,
                               bool epilogue) {
  const size_t g = group_of(tensor);
  std::vector<IndexForm> forms;
  for (const Expr& e : indices) forms.push_back(analyze_index(e));
  // A tensor also read in the main body is not epilogue-only.
  if (groups_[g].accesses.empty()) {
    tensors_[g].epilogue = epilogue;
  } else if (!epilogue) {
    tensors_[g].epilogue = false;
  }
  groups_[g].accesses.push_back(std::move(forms));
  tensors_[g].accesses.push_back(indices);
}

void AccessRegions::add_output(const ir::TensorNode* tensor, const std::vector<Expr>& point) {
  std::vector<Expr> idx(iters_.begin(), iters_.begin() + num_spatial_);
  add_access(tensor, point.empty() ? idx : point, false);
  tensors_[group_of(tensor)].is_output = true;
}

void AccessRegions::index_range(const IndexForm& f, const std::vector<int64_t>& tile, int64_t* lo,
                                int64_t* hi) const {
  if (f.affine) {
    int64_t l = 0, h = 0;
    for (size_t d = 0; d < f.coef.size(); ++d) {
      if (f.coef[d] == 0) continue;
      int64_t span = sat_mul(f.coef[d], clamp_tile(tile[d], extents_[d]) - 1);
      if (span > 0)
        h = sat_add(h, span);
      else
        l = sat_add(l, span);
    }
    *lo = l;
    *hi = h;
    return;
  }
  ir::BoundMap bm;
  for (size_t d = 0; d < iters_.size(); ++d) {
    bm[iters_[d].get()] = ir::ConstIntBound{0, clamp_tile(tile[d], extents_[d]) - 1};
  }
  ir::ConstIntBound b = ir::const_int_bound(f.expr, &bm);
  *lo = b.lo;
  *hi = b.hi;
}

std::vector<int64_t> AccessRegions::region_shape(size_t t, const std::vector<int64_t>& tile) const {
  TESSERA_CHECK(tile.size() == iters_.size())
      << "tile has " << tile.size() << " sizes for " << iters_.size() << " iterators";
  const TensorAccesses& ta = tensors_[t];
  const Group& g = groups_[t];
  const size_t nd = ta.shape.size();
  std::vector<int64_t> shape(nd, 1);
  for (size_t d = 0; d < nd; ++d) {
    int64_t lo = ir::kNoUpperBound, hi = ir::kNoLowerBound;
    for (const auto& acc : g.accesses) {
      int64_t l, h;
      index_range(acc[d], tile, &l, &h);
      lo = std::min(lo, l);
      hi = std::max(hi, h);
    }
    int64_t span;
    if (lo == ir::kNoLowerBound || hi == ir::kNoUpperBound) {
      span = ir::kNoUpperBound;
    } else {
      span = sat_add(sat_add(hi, -lo), 1);
    }
    if (ta.shape[d] > 0) span = std::min(span, ta.shape[d]);
    if (span == ir::kNoUpperBound) span = 1 << 20;  // symbolic and unbounded: a large guess
    shape[d] = std::max<int64_t>(1, span);
  }
  return shape;
}

double AccessRegions::region_bytes(size_t t, const std::vector<int64_t>& tile,
                                   int line_bytes) const {
  std::vector<int64_t> shape = region_shape(t, tile);
  const int eb = tensors_[t].elem_bytes;
  double bytes = eb;
  for (size_t d = 0; d < shape.size(); ++d) {
    double dim = static_cast<double>(shape[d]);
    if (d + 1 == shape.size() && line_bytes > 0) {
      dim = std::ceil(dim * eb / line_bytes) * line_bytes / eb;
    }
    bytes *= dim;
  }
  return bytes;
}

double AccessRegions::footprint_bytes(const std::vector<int64_t>& tile, int line_bytes) const {
  double f = 0;
  for (size_t t = 0; t < tensors_.size(); ++t) f += region_bytes(t, tile, line_bytes);
  return f;
}

int64_t AccessRegions::element_stride(size_t t, int iter) const {
  const TensorAccesses& ta = tensors_[t];
  const Group& g = groups_[t];
  if (g.accesses.empty()) return -1;
  int64_t stride = 0, inner = 1;
  for (size_t d = ta.shape.size(); d-- > 0;) {
    const IndexForm& f = g.accesses.front()[d];
    if (!f.affine || ta.shape[d] <= 0) return -1;
    stride = sat_add(stride, sat_mul(f.coef[iter], inner));
    inner = sat_mul(inner, ta.shape[d]);
  }
  return stride;
}

double AccessRegions::spatial_tiles(const std::vector<int64_t>& tile) const {
  double n = 1;
  for (int d = 0; d < num_spatial_; ++d) {
    n *= static_cast<double>(ceil_div(extents_[d], clamp_tile(tile[d], extents_[d])));
  }
  return n;
}

double AccessRegions::reduce_tiles(const std::vector<int64_t>& tile) const {
  double n = 1;
  for (size_t d = num_spatial_; d < iters_.size(); ++d) {
    n *= static_cast<double>(ceil_div(extents_[d], clamp_tile(tile[d], extents_[d])));
  }
  return n;
}

AccessRegions::Traffic AccessRegions::traffic(const std::vector<int64_t>& tile, int line_bytes,
                                              bool output_stays) const {
  const double ns = spatial_tiles(tile), nr = reduce_tiles(tile);
  Traffic q;
  for (size_t t = 0; t < tensors_.size(); ++t) {
    const double r = region_bytes(t, tile, line_bytes);
    if (tensors_[t].is_output) {
      q.output_bytes += r * ns * (output_stays ? 1 : 2 * nr - 1);
    } else if (tensors_[t].epilogue) {
      q.input_bytes += r * ns;
    } else {
      q.input_bytes += r * ns * nr;
    }
  }
  return q;
}

}  // namespace tessera::cost
