#include "ops/conv.h"

#include "util/check.h"

namespace tessera::ops {

using ir::Expr;
using ir::Tensor;
using ir::Var;

namespace {

void check_params(const std::string& op, Int2 stride, Int2 padding, Int2 dilation, int64_t groups) {
  for (int d = 0; d < 2; ++d) {
    TESSERA_CHECK(stride[d] >= 1) << op << ": stride must be >= 1, got " << stride[d];
    TESSERA_CHECK(dilation[d] >= 1) << op << ": dilation must be >= 1, got " << dilation[d];
    TESSERA_CHECK(padding[d] >= 0) << op << ": padding must be >= 0, got " << padding[d];
  }
  TESSERA_CHECK(groups >= 1) << op << ": groups must be >= 1, got " << groups;
}

void check_divisible(const Expr& dim, int64_t groups, const std::string& what) {
  if (auto c = const_value(dim)) {
    TESSERA_CHECK(*c % groups == 0)
        << what << " (" << *c << ") is not divisible by groups (" << groups << ")";
  }
}

void check_positive(const Expr& extent, const std::string& what) {
  if (auto c = const_value(extent)) {
    TESSERA_CHECK(*c > 0) << what << " would be " << *c << " (input too small for the kernel)";
  }
}

std::map<std::string, std::string> conv_attrs(Int2 stride, Int2 padding, Int2 dilation,
                                              int64_t groups) {
  return {{"stride", ints_str({stride[0], stride[1]})},
          {"padding", ints_str({padding[0], padding[1]})},
          {"dilation", ints_str({dilation[0], dilation[1]})},
          {"groups", std::to_string(groups)}};
}

// out[n, o, y, x] = conv[n, o, y, x] + bias[o]
Tensor add_channel_bias(const Tensor& conv, const Tensor& bias, const Expr& out_channels,
                        const std::string& op, const std::string& name) {
  check_ndim(bias, 1, op, "bias");
  check_same_dtype(conv, bias, op);
  check_dims_equal(bias->shape[0], out_channels,
                   op + ": bias" + shape_str(bias->shape) + " does not match out channels");
  return compute_named(
      name + "_bias", conv->shape, {"n", "o", "y", "x"},
      [&](const std::vector<Var>& v) {
        return ir::access(conv, {v[0], v[1], v[2], v[3]}) + ir::access(bias, {v[1]});
      },
      "elementwise", {{"epilogue", "bias_add"}});
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& bias, Int2 stride, Int2 padding,
              Int2 dilation, int64_t groups, const std::string& name) {
  const std::string op = "conv2d";
  check_ndim(x, 4, op, "X");
  check_ndim(w, 4, op, "W");
  check_same_dtype(x, w, op);
  check_params(op, stride, padding, dilation, groups);
  const Expr c = x->shape[1], o = w->shape[0], cg = w->shape[1];
  const Expr kh = w->shape[2], kw = w->shape[3];
  check_divisible(c, groups, op + ": input channels");
  check_divisible(o, groups, op + ": output channels");
  check_dims_equal(cg, ir::floordiv(c, ir::int_imm(groups)),
                   op + ": W" + shape_str(w->shape) + " must have C/groups input channels for X" +
                       shape_str(x->shape) + " and groups=" + std::to_string(groups));

  // Output extent per spatial dim.
  Expr out[2];
  const Expr in[2] = {x->shape[2], x->shape[3]};
  const Expr k[2] = {kh, kw};
  for (int d = 0; d < 2; ++d) {
    Expr span = ir::int_imm(dilation[d]) * (k[d] - 1) + 1;  // receptive field of one output
    out[d] = ir::floordiv(in[d] + 2 * padding[d] - span, ir::int_imm(stride[d])) + 1;
    check_positive(out[d], op + ": output " + (d ? "width" : "height") + " of X" +
                               shape_str(x->shape) + " with W" + shape_str(w->shape));
  }

  Tensor xp = x;
  if (padding[0] > 0 || padding[1] > 0) {
    xp = pad_spatial(x, in[0] + 2 * padding[0], in[1] + 2 * padding[1], ir::int_imm(padding[0]),
                     ir::int_imm(padding[1]), 1, 1, ir::float_imm(0.0, x->dtype), x->name + "_pad");
  }

  // Each group of O/groups output channels reads its own block of cg input channels. With one
  // input channel per group (depthwise) the rc iterator would have extent 1 and is left out.
  const bool single_channel = is_const_value(cg, 1);
  const Expr out_per_group = ir::floordiv(o, ir::int_imm(groups));
  auto in_channel = [&](const Expr& oc, const Expr& rc) -> Expr {
    if (groups == 1) return rc;
    Expr base = ir::floordiv(oc, out_per_group) * cg;
    return rc.defined() ? base + rc : base;
  };

  Shape rext = {kh, kw};
  std::vector<std::string> rnames = {"ry", "rx"};
  if (!single_channel) {
    rext.insert(rext.begin(), cg);
    rnames.insert(rnames.begin(), "rc");
  }
  auto attrs = conv_attrs(stride, padding, dilation, groups);
  if (groups > 1 && is_const_value(c, groups)) attrs["depthwise"] = "1";

  Tensor y = reduce_named(
      name, {x->shape[0], o, out[0], out[1]}, {"n", "o", "y", "x"}, rext, rnames,
      ir::ReduceKind::kSum,
      [&](const std::vector<Var>& v, const std::vector<Var>& r) {
        const Expr rc = single_channel ? Expr() : r[0];
        const Expr ry = r[single_channel ? 0 : 1], rx = r[single_channel ? 1 : 2];
        const Expr ic = single_channel && groups == 1 ? ir::int_imm(0) : in_channel(v[1], rc);
        const Expr wc = single_channel ? ir::int_imm(0) : rc;
        Expr ih = v[2] * stride[0] + ry * dilation[0];
        Expr iw = v[3] * stride[1] + rx * dilation[1];
        return ir::access(xp, {v[0], ic, ih, iw}) * ir::access(w, {v[1], wc, ry, rx});
      },
      "conv2d", attrs);
  return bias ? add_channel_bias(y, bias, o, op, name) : y;
}

Tensor conv_transpose2d(const Tensor& x, const Tensor& w, const Tensor& bias, Int2 stride,
                        Int2 padding, Int2 output_padding, Int2 dilation, int64_t groups,
                        const std::string& name) {
  const std::string op = "conv_transpose2d";
  check_ndim(x, 4, op, "X");
  check_ndim(w, 4, op, "W");
  check_same_dtype(x, w, op);
  check_params(op, stride, padding, dilation, groups);
  for (int d = 0; d < 2; ++d) {
    TESSERA_CHECK(output_padding[d] >= 0 &&
                  (output_padding[d] < stride[d] || output_padding[d] < dilation[d]))
        << op << ": output_padding (" << output_padding[d]
        << ") must be smaller than either stride (" << stride[d] << ") or dilation (" << dilation[d]
        << ")";
  }
  const Expr c = x->shape[1];
  const Expr og = w->shape[1];  // output channels per group
  const Expr kh = w->shape[2], kw = w->shape[3];
  check_dims_equal(w->shape[0], c,
                   op + ": W" + shape_str(w->shape) + " must have the input channels of X" +
                       shape_str(x->shape) + " first ([C, O/groups, KH, KW])");
  check_divisible(c, groups, op + ": input channels");
  const Expr o = og * groups;
  const Expr cg = ir::floordiv(c, ir::int_imm(groups));  // input channels per group

  // Dilated + padded input: row h holds X row (h - off) / stride when that is whole and in range,
  // with off = dil*(K-1) - pad leading rows (negative: the padding crops), and output_padding
  // extra rows at the end. A stride-1 convolution over it produces the transposed convolution.
  const Expr in[2] = {x->shape[2], x->shape[3]};
  const Expr k[2] = {kh, kw};
  Expr off[2], padded[2], out[2];
  bool need_pad = false;
  for (int d = 0; d < 2; ++d) {
    Expr reach = ir::int_imm(dilation[d]) * (k[d] - 1);
    off[d] = reach - padding[d];
    padded[d] = (in[d] - 1) * stride[d] + 1 + 2 * off[d] + output_padding[d];
    out[d] = padded[d] - reach;
    check_positive(out[d], op + ": output " + (d ? "width" : "height") + " of X" +
                               shape_str(x->shape) + " with W" + shape_str(w->shape));
    need_pad |= stride[d] != 1 || !is_const_value(off[d], 0) || output_padding[d] != 0;
  }
  Tensor xp = x;
  if (need_pad) {
    xp = pad_spatial(x, padded[0], padded[1], off[0], off[1], stride[0], stride[1],
                     ir::float_imm(0.0, x->dtype),
                     x->name + (stride[0] > 1 || stride[1] > 1 ? "_dilate_pad" : "_pad"));
  }

  auto attrs = conv_attrs(stride, padding, dilation, groups);
  attrs["output_padding"] = ints_str({output_padding[0], output_padding[1]});
  Tensor y = reduce_named(
      name, {x->shape[0], o, out[0], out[1]}, {"n", "o", "y", "x"}, {cg, kh, kw},
      {"rc", "ry", "rx"}, ir::ReduceKind::kSum,
      [&](const std::vector<Var>& v, const std::vector<Var>& r) {
        // Input channel of group g = o / og; the weight is read flipped in both spatial dims.
        Expr ic = groups == 1 ? Expr(r[0]) : ir::floordiv(v[1], og) * cg + r[0];
        Expr wo = groups == 1 ? Expr(v[1]) : ir::floormod(v[1], og);
        Expr xv = ir::access(xp, {v[0], ic, v[2] + r[1] * dilation[0], v[3] + r[2] * dilation[1]});
        Expr wv = ir::access(w, {ic, wo, kh - 1 - r[1], kw - 1 - r[2]});
        return xv * wv;
      },
      "conv_transpose2d", attrs);
  return bias ? add_channel_bias(y, bias, o, op, name) : y;
}

}  // namespace tessera::ops
