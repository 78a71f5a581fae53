#include "ops/pool.h"

#include "util/check.h"

namespace tessera::ops {

using ir::Expr;
using ir::Tensor;
using ir::Var;

namespace {

struct PoolGeometry {
  Int2 kernel, stride, padding, dilation;
  Expr in[2];      // input extents
  Expr out[2];     // output extents
  Expr needed[2];  // padded extent the windows read: (out-1)*stride + dil*(k-1) + 1
  bool pad_needed = false;
};

// torch's pooling_output_shape: floor or ceil division, and in ceil mode the last window is
// dropped when it would start inside the right padding (or beyond).
Expr pool_out_extent(const Expr& in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  const int64_t span = d * (k - 1) + 1;
  Expr o = ir::floordiv(in + (2 * p - span + (ceil_mode ? s - 1 : 0)), ir::int_imm(s)) + 1;
  if (ceil_mode) {
    Expr last_start = (o - 1) * s;
    o = ir::select(ir::ge(last_start, in + p), o - 1, o);
  }
  return o;
}

PoolGeometry pool_geometry(const std::string& op, const Tensor& x, Int2 kernel, Int2 stride,
                           Int2 padding, Int2 dilation, bool ceil_mode) {
  check_ndim(x, 4, op, "X");
  PoolGeometry g;
  g.kernel = kernel;
  g.stride = stride;
  g.padding = padding;
  g.dilation = dilation;
  for (int d = 0; d < 2; ++d) {
    if (g.stride[d] == 0) g.stride[d] = kernel[d];
    TESSERA_CHECK(kernel[d] >= 1) << op << ": kernel must be >= 1, got " << kernel[d];
    TESSERA_CHECK(g.stride[d] >= 1) << op << ": stride must be >= 1, got " << g.stride[d];
    TESSERA_CHECK(dilation[d] >= 1) << op << ": dilation must be >= 1, got " << dilation[d];
    TESSERA_CHECK(padding[d] >= 0 && padding[d] <= kernel[d] / 2)
        << op << ": padding (" << padding[d] << ") must be between 0 and half the kernel size ("
        << kernel[d] << ")";
    g.in[d] = x->shape[2 + d];
    g.out[d] = pool_out_extent(g.in[d], kernel[d], g.stride[d], padding[d], dilation[d], ceil_mode);
    if (auto c = const_value(g.out[d])) {
      TESSERA_CHECK(*c > 0) << op << ": output " << (d ? "width" : "height") << " of X"
                            << shape_str(x->shape) << " would be " << *c << " (kernel " << kernel[d]
                            << ", padding " << padding[d] << ")";
    }
    g.needed[d] = (g.out[d] - 1) * g.stride[d] + (dilation[d] * (kernel[d] - 1) + 1);
    // Without padding the windows stay inside the input unless ceil mode adds a partial one.
    bool inside = padding[d] == 0 && !ceil_mode;
    auto cn = const_value(g.needed[d]), ci = const_value(g.in[d]);
    if (padding[d] == 0 && cn && ci && *cn <= *ci) inside = true;
    g.pad_needed |= !inside;
  }
  return g;
}

std::map<std::string, std::string> pool_attrs(const PoolGeometry& g, bool ceil_mode) {
  return {{"kernel", ints_str({g.kernel[0], g.kernel[1]})},
          {"stride", ints_str({g.stride[0], g.stride[1]})},
          {"padding", ints_str({g.padding[0], g.padding[1]})},
          {"dilation", ints_str({g.dilation[0], g.dilation[1]})},
          {"ceil_mode", ceil_mode ? "1" : "0"}};
}

// The pooling reduction: out[n, c, y, x] = reduce(ry, rx) Xp[n, c, y*s + ry*d, x*s + rx*d],
// reading the input through a pad op holding `pad_value` outside it when windows leave it.
Tensor pool_reduce(const Tensor& x, const PoolGeometry& g, ir::ReduceKind kind,
                   const Expr& pad_value, const std::string& name, const std::string& tag,
                   std::map<std::string, std::string> attrs) {
  Tensor xp = x;
  if (g.pad_needed) {
    xp = pad_spatial(x, g.needed[0], g.needed[1], ir::int_imm(g.padding[0]),
                     ir::int_imm(g.padding[1]), 1, 1, pad_value, x->name + "_pad");
  }
  return reduce_named(
      name, {x->shape[0], x->shape[1], g.out[0], g.out[1]}, {"n", "c", "y", "x"},
      {ir::int_imm(g.kernel[0]), ir::int_imm(g.kernel[1])}, {"ry", "rx"}, kind,
      [&](const std::vector<Var>& v, const std::vector<Var>& r) {
        return ir::access(xp, {v[0], v[1], v[2] * g.stride[0] + r[0] * g.dilation[0],
                               v[3] * g.stride[1] + r[1] * g.dilation[1]});
      },
      tag, std::move(attrs));
}

// Number of positions averaged by the window starting at `start` (may be negative) in one dim,
// as torch counts them: clipped to [-pad, in + pad), then to [0, in) without count_include_pad.
// Returns a constant when every window has the same count.
Expr window_count(const Expr& idx, const PoolGeometry& g, int d, bool count_include_pad) {
  const int64_t k = g.kernel[d], s = g.stride[d], p = g.padding[d];
  // Constant when the last window ends inside the counted region (they all start inside it).
  auto c_needed = const_value(g.needed[d]), c_in = const_value(g.in[d]);
  if (c_needed && c_in) {
    if (count_include_pad && *c_needed <= *c_in + 2 * p) return ir::int_imm(k);
    if (!count_include_pad && p == 0 && *c_needed <= *c_in) return ir::int_imm(k);
  }
  // The window covers [idx*s - p, idx*s - p + k).
  if (count_include_pad) {
    return ir::min(idx * s + (k - p), g.in[d] + p) - (idx * s - p);
  }
  return ir::min(idx * s + (k - p), g.in[d]) - ir::max(idx * s - p, ir::int_imm(0));
}

}  // namespace

Tensor avg_pool2d(const Tensor& x, Int2 kernel, Int2 stride, Int2 padding, bool ceil_mode,
                  bool count_include_pad, const std::string& name) {
  const std::string op = "avg_pool2d";
  PoolGeometry g = pool_geometry(op, x, kernel, stride, padding, {1, 1}, ceil_mode);
  TESSERA_CHECK(ir::is_float(x->dtype))
      << op << ": needs a float input, " << x->name << " is " << ir::dtype_name(x->dtype);
  auto attrs = pool_attrs(g, ceil_mode);
  attrs["count_include_pad"] = count_include_pad ? "1" : "0";
  Tensor sum = pool_reduce(x, g, ir::ReduceKind::kSum, ir::float_imm(0.0, x->dtype), name + "_sum",
                           "pool_avg", attrs);
  return compute_named(
      name, sum->shape, {"n", "c", "y", "x"},
      [&](const std::vector<Var>& v) {
        Expr count = window_count(v[2], g, 0, count_include_pad) *
                     window_count(v[3], g, 1, count_include_pad);
        return ir::div(ir::access(sum, {v[0], v[1], v[2], v[3]}), ir::cast(x->dtype, count));
      },
      "elementwise", {{"epilogue", "avg_pool_divide"}});
}

Tensor max_pool2d(const Tensor& x, Int2 kernel, Int2 stride, Int2 padding, Int2 dilation,
                  bool ceil_mode, const std::string& name) {
  const std::string op = "max_pool2d";
  PoolGeometry g = pool_geometry(op, x, kernel, stride, padding, dilation, ceil_mode);
  return pool_reduce(x, g, ir::ReduceKind::kMax,
                     ir::reduce_identity(ir::ReduceKind::kMax, x->dtype), name, "pool_max",
                     pool_attrs(g, ceil_mode));
}

}  // namespace tessera::ops
