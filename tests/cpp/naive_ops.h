#pragma once
// Independent naive implementations of the operator library, written directly as loops over
// NDArrays (not derived from the tensor-expression definitions), plus small test helpers.
// Everything computes in double and returns float64 arrays. Semantics follow torch; where the
// TE definitions use a reformulation (e.g. transposed convolution as a convolution over a
// dilated input) these loops use the textbook form (scatter), so the two check each other.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <utility>
#include <vector>

#include "ir/tensor.h"
#include "ops/reference.h"
#include "runtime/ndarray.h"
#include "util/check.h"

namespace tessera::naive {

using runtime::NDArray;
using Dims = std::vector<int64_t>;

inline NDArray f64(const Dims& shape) { return NDArray(ir::DType::kFloat64, shape); }

inline int64_t numel(const Dims& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// Row-major multi-index of a flat index.
inline Dims unravel(int64_t flat, const Dims& shape) {
  Dims idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  return idx;
}

inline int64_t ravel(const Dims& idx, const Dims& shape) {
  int64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + idx[d];
  return flat;
}

// ---- linear algebra ------------------------------------------------------------------------

inline NDArray matmul(const NDArray& a, const NDArray& b, bool ta = false, bool tb = false) {
  const int64_t m = ta ? a.shape[1] : a.shape[0], k = ta ? a.shape[0] : a.shape[1];
  const int64_t n = tb ? b.shape[0] : b.shape[1];
  NDArray c = f64({m, n});
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) {
        const double av = ta ? a.at({p, i}) : a.at({i, p});
        const double bv = tb ? b.at({j, p}) : b.at({p, j});
        s += av * bv;
      }
      c.set(i * n + j, s);
    }
  }
  return c;
}

inline NDArray batch_matmul(const NDArray& a, const NDArray& b, bool ta = false, bool tb = false) {
  const int64_t bt = a.shape[0];
  const int64_t m = ta ? a.shape[2] : a.shape[1], k = ta ? a.shape[1] : a.shape[2];
  const int64_t n = tb ? b.shape[1] : b.shape[2];
  NDArray c = f64({bt, m, n});
  for (int64_t q = 0; q < bt; ++q) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p) {
          s += (ta ? a.at({q, p, i}) : a.at({q, i, p})) * (tb ? b.at({q, j, p}) : b.at({q, p, j}));
        }
        c.set((q * m + i) * n + j, s);
      }
    }
  }
  return c;
}

// y = x w^T + bias
inline NDArray dense(const NDArray& x, const NDArray& w, const NDArray* bias = nullptr) {
  const int64_t m = x.shape[0], k = x.shape[1], n = w.shape[0];
  NDArray y = f64({m, n});
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = bias ? bias->get(j) : 0.0;
      for (int64_t p = 0; p < k; ++p) s += x.at({i, p}) * w.at({j, p});
      y.set(i * n + j, s);
    }
  }
  return y;
}

// ---- convolution ---------------------------------------------------------------------------

struct Conv2dParams {
  int64_t sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1, groups = 1;
};

// Direct convolution: every tap reads the input if it falls inside, else contributes 0.
inline NDArray conv2d(const NDArray& x, const NDArray& w, const NDArray* bias,
                      const Conv2dParams& p) {
  const int64_t n = x.shape[0], c = x.shape[1], h = x.shape[2], wd = x.shape[3];
  const int64_t o = w.shape[0], kh = w.shape[2], kw = w.shape[3];
  const int64_t cg = c / p.groups, og = o / p.groups;
  const int64_t oh = (h + 2 * p.ph - p.dh * (kh - 1) - 1) / p.sh + 1;
  const int64_t ow = (wd + 2 * p.pw - p.dw * (kw - 1) - 1) / p.sw + 1;
  NDArray y = f64({n, o, oh, ow});
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t oc = 0; oc < o; ++oc) {
      const int64_t g = oc / og;
      for (int64_t oy = 0; oy < oh; ++oy) {
        for (int64_t ox = 0; ox < ow; ++ox) {
          double s = bias ? bias->get(oc) : 0.0;
          for (int64_t icl = 0; icl < cg; ++icl) {
            for (int64_t ky = 0; ky < kh; ++ky) {
              for (int64_t kx = 0; kx < kw; ++kx) {
                const int64_t iy = oy * p.sh - p.ph + ky * p.dh;
                const int64_t ix = ox * p.sw - p.pw + kx * p.dw;
                if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
                s += x.at({b, g * cg + icl, iy, ix}) * w.at({oc, icl, ky, kx});
              }
            }
          }
          y.set(ravel({b, oc, oy, ox}, y.shape), s);
        }
      }
    }
  }
  return y;
}

// Transposed convolution as the gradient of conv2d: every input element scatters
// x * w into the output positions its taps reach.
inline NDArray conv_transpose2d(const NDArray& x, const NDArray& w, const NDArray* bias,
                                const Conv2dParams& p, int64_t oph, int64_t opw) {
  const int64_t n = x.shape[0], c = x.shape[1], h = x.shape[2], wd = x.shape[3];
  const int64_t og = w.shape[1], kh = w.shape[2], kw = w.shape[3];
  const int64_t cg = c / p.groups, o = og * p.groups;
  const int64_t oh = (h - 1) * p.sh - 2 * p.ph + p.dh * (kh - 1) + oph + 1;
  const int64_t ow = (wd - 1) * p.sw - 2 * p.pw + p.dw * (kw - 1) + opw + 1;
  NDArray y = f64({n, o, oh, ow});
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t ic = 0; ic < c; ++ic) {
      const int64_t g = ic / cg;
      for (int64_t iy = 0; iy < h; ++iy) {
        for (int64_t ix = 0; ix < wd; ++ix) {
          const double xv = x.at({b, ic, iy, ix});
          for (int64_t ocl = 0; ocl < og; ++ocl) {
            for (int64_t ky = 0; ky < kh; ++ky) {
              for (int64_t kx = 0; kx < kw; ++kx) {
                const int64_t oy = iy * p.sh - p.ph + ky * p.dh;
                const int64_t ox = ix * p.sw - p.pw + kx * p.dw;
                if (oy < 0 || oy >= oh || ox < 0 || ox >= ow) continue;
                const int64_t flat = ravel({b, g * og + ocl, oy, ox}, y.shape);
                y.set(flat, y.get(flat) + xv * w.at({ic, ocl, ky, kx}));
              }
            }
          }
        }
      }
    }
  }
  if (bias) {
    for (int64_t k = 0; k < y.numel(); ++k) y.set(k, y.get(k) + bias->get(unravel(k, y.shape)[1]));
  }
  return y;
}

// ---- pooling (torch's CPU kernels, written out) --------------------------------------------

inline int64_t pool_out(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  const int64_t eff = d * (k - 1) + 1;
  const int64_t num = in + 2 * p - eff;
  int64_t o = (ceil_mode ? (num + s - 1) / s : num / s) + 1;  // num >= 0 in the tests
  if (ceil_mode && (o - 1) * s >= in + p) --o;
  return o;
}

inline NDArray avg_pool2d(const NDArray& x, int64_t k, int64_t s, int64_t p, bool ceil_mode,
                          bool count_include_pad) {
  const int64_t n = x.shape[0], c = x.shape[1], h = x.shape[2], w = x.shape[3];
  const int64_t oh = pool_out(h, k, s, p, 1, ceil_mode), ow = pool_out(w, k, s, p, 1, ceil_mode);
  NDArray y = f64({n, c, oh, ow});
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t ch = 0; ch < c; ++ch) {
      for (int64_t oy = 0; oy < oh; ++oy) {
        for (int64_t ox = 0; ox < ow; ++ox) {
          int64_t hs = oy * s - p, ws = ox * s - p;
          int64_t he = std::min(hs + k, h + p), we = std::min(ws + k, w + p);
          const int64_t pool_size = (he - hs) * (we - ws);
          hs = std::max<int64_t>(hs, 0);
          ws = std::max<int64_t>(ws, 0);
          he = std::min(he, h);
          we = std::min(we, w);
          double sum = 0;
          for (int64_t iy = hs; iy < he; ++iy) {
            for (int64_t ix = ws; ix < we; ++ix) sum += x.at({b, ch, iy, ix});
          }
          const int64_t div = count_include_pad ? pool_size : (he - hs) * (we - ws);
          y.set(ravel({b, ch, oy, ox}, y.shape), sum / static_cast<double>(div));
        }
      }
    }
  }
  return y;
}

inline NDArray max_pool2d(const NDArray& x, int64_t k, int64_t s, int64_t p, int64_t d,
                          bool ceil_mode) {
  const int64_t n = x.shape[0], c = x.shape[1], h = x.shape[2], w = x.shape[3];
  const int64_t oh = pool_out(h, k, s, p, d, ceil_mode), ow = pool_out(w, k, s, p, d, ceil_mode);
  NDArray y = f64({n, c, oh, ow});
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t ch = 0; ch < c; ++ch) {
      for (int64_t oy = 0; oy < oh; ++oy) {
        for (int64_t ox = 0; ox < ow; ++ox) {
          double m = -std::numeric_limits<double>::infinity();
          for (int64_t ky = 0; ky < k; ++ky) {
            for (int64_t kx = 0; kx < k; ++kx) {
              const int64_t iy = oy * s - p + ky * d, ix = ox * s - p + kx * d;
              if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
              m = std::max(m, x.at({b, ch, iy, ix}));
            }
          }
          y.set(ravel({b, ch, oy, ox}, y.shape), m);
        }
      }
    }
  }
  return y;
}

// ---- reductions ----------------------------------------------------------------------------

enum class Red { kSum, kMean, kMax, kMin };

// Reduces over `axes` (already non-negative; empty = all) by visiting every input element once
// and folding it into the output element it maps to.
inline NDArray reduce(const NDArray& x, Dims axes, bool keepdim, Red kind) {
  const int nd = x.ndim();
  if (axes.empty()) {
    for (int d = 0; d < nd; ++d) axes.push_back(d);
  }
  std::vector<bool> red(nd, false);
  for (int64_t a : axes) red[a] = true;
  Dims full_out;  // output shape with reduced dims as 1
  Dims out_shape;
  int64_t count = 1;
  for (int d = 0; d < nd; ++d) {
    full_out.push_back(red[d] ? 1 : x.shape[d]);
    if (red[d]) count *= x.shape[d];
    if (!red[d] || keepdim) out_shape.push_back(red[d] ? 1 : x.shape[d]);
  }
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> acc(numel(full_out),
                          kind == Red::kMax ? -inf : (kind == Red::kMin ? inf : 0.0));
  for (int64_t k = 0; k < x.numel(); ++k) {
    Dims idx = unravel(k, x.shape);
    for (int d = 0; d < nd; ++d) {
      if (red[d]) idx[d] = 0;
    }
    double& a = acc[ravel(idx, full_out)];
    const double v = x.get(k);
    switch (kind) {
      case Red::kSum:
      case Red::kMean:
        a += v;
        break;
      case Red::kMax:
        a = std::max(a, v);
        break;
      case Red::kMin:
        a = std::min(a, v);
        break;
    }
  }
  NDArray y = f64(out_shape);
  for (int64_t k = 0; k < y.numel(); ++k) {
    y.set(k, kind == Red::kMean ? acc[k] / static_cast<double>(count) : acc[k]);
  }
  return y;
}

// ---- normalisation -------------------------------------------------------------------------

// Calls f(base, stride, len) for every line of `x` along `axis`.
inline void for_each_line(const Dims& shape, int axis,
                          const std::function<void(int64_t, int64_t, int64_t)>& f) {
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t len = shape[axis];
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) f(o * len * inner + i, inner, len);
  }
}

inline NDArray softmax(const NDArray& x, int axis, bool log_space = false) {
  NDArray y = f64(x.shape);
  for_each_line(x.shape, axis, [&](int64_t base, int64_t stride, int64_t len) {
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t t = 0; t < len; ++t) m = std::max(m, x.get(base + t * stride));
    double sum = 0;
    for (int64_t t = 0; t < len; ++t) sum += std::exp(x.get(base + t * stride) - m);
    for (int64_t t = 0; t < len; ++t) {
      const double v = x.get(base + t * stride);
      y.set(base + t * stride, log_space ? v - m - std::log(sum) : std::exp(v - m) / sum);
    }
  });
  return y;
}

inline NDArray layer_norm(const NDArray& x, int normalized_ndim, const NDArray* gamma,
                          const NDArray* beta, double eps) {
  int64_t inner = 1;
  for (int d = x.ndim() - normalized_ndim; d < x.ndim(); ++d) inner *= x.shape[d];
  const int64_t outer = x.numel() / inner;
  NDArray y = f64(x.shape);
  for (int64_t o = 0; o < outer; ++o) {
    double mean = 0;
    for (int64_t i = 0; i < inner; ++i) mean += x.get(o * inner + i);
    mean /= static_cast<double>(inner);
    double var = 0;
    for (int64_t i = 0; i < inner; ++i) {
      const double dlt = x.get(o * inner + i) - mean;
      var += dlt * dlt;
    }
    var /= static_cast<double>(inner);
    const double rstd = 1.0 / std::sqrt(var + eps);
    for (int64_t i = 0; i < inner; ++i) {
      double v = (x.get(o * inner + i) - mean) * rstd;
      if (gamma) v *= gamma->get(i);
      if (beta) v += beta->get(i);
      y.set(o * inner + i, v);
    }
  }
  return y;
}

// ---- elementwise ---------------------------------------------------------------------------

inline Dims broadcast_shape(const Dims& a, const Dims& b) {
  const size_t n = std::max(a.size(), b.size());
  Dims out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1;
    const int64_t db = i < b.size() ? b[b.size() - 1 - i] : 1;
    out[n - 1 - i] = da == 1 ? db : da;
  }
  return out;
}

// Flat index into an array of `shape` for a point of the broadcast result.
inline int64_t broadcast_flat(const Dims& out_idx, const Dims& shape) {
  const size_t skip = out_idx.size() - shape.size();
  int64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    flat = flat * shape[d] + (shape[d] == 1 ? 0 : out_idx[skip + d]);
  }
  return flat;
}

inline NDArray map(const NDArray& x, const std::function<double(double)>& f) {
  NDArray y = f64(x.shape);
  for (int64_t k = 0; k < x.numel(); ++k) y.set(k, f(x.get(k)));
  return y;
}

inline NDArray zip(const NDArray& a, const NDArray& b,
                   const std::function<double(double, double)>& f) {
  NDArray y = f64(broadcast_shape(a.shape, b.shape));
  for (int64_t k = 0; k < y.numel(); ++k) {
    const Dims idx = unravel(k, y.shape);
    y.set(k, f(a.get(broadcast_flat(idx, a.shape)), b.get(broadcast_flat(idx, b.shape))));
  }
  return y;
}

inline NDArray where(const NDArray& c, const NDArray& a, const NDArray& b) {
  NDArray y = f64(broadcast_shape(broadcast_shape(c.shape, a.shape), b.shape));
  for (int64_t k = 0; k < y.numel(); ++k) {
    const Dims idx = unravel(k, y.shape);
    const bool cond = c.get(broadcast_flat(idx, c.shape)) != 0;
    y.set(k, cond ? a.get(broadcast_flat(idx, a.shape)) : b.get(broadcast_flat(idx, b.shape)));
  }
  return y;
}

// ---- shape ---------------------------------------------------------------------------------

inline NDArray permute(const NDArray& x, const Dims& perm) {
  Dims shape;
  for (int64_t p : perm) shape.push_back(x.shape[p]);
  NDArray y = f64(shape);
  for (int64_t k = 0; k < y.numel(); ++k) {
    const Dims oi = unravel(k, shape);
    Dims ii(x.ndim());
    for (size_t d = 0; d < perm.size(); ++d) ii[perm[d]] = oi[d];
    y.set(k, x.get(ravel(ii, x.shape)));
  }
  return y;
}

// Row-major reshape keeps the flat order: a copy with a new shape.
inline NDArray reshape(const NDArray& x, const Dims& shape) {
  NDArray y = f64(shape);
  for (int64_t k = 0; k < x.numel(); ++k) y.set(k, x.get(k));
  return y;
}

inline NDArray concat(const std::vector<const NDArray*>& xs, int axis) {
  Dims shape = xs[0]->shape;
  shape[axis] = 0;
  for (const NDArray* x : xs) shape[axis] += x->shape[axis];
  NDArray y = f64(shape);
  int64_t offset = 0;
  for (const NDArray* x : xs) {
    for (int64_t k = 0; k < x->numel(); ++k) {
      Dims idx = unravel(k, x->shape);
      idx[axis] += offset;
      y.set(ravel(idx, shape), x->get(k));
    }
    offset += x->shape[axis];
  }
  return y;
}

// Python x[start:end:step] along `axis` with the usual clamping.
inline NDArray slice(const NDArray& x, int axis, int64_t start, int64_t end, int64_t step) {
  const int64_t n = x.shape[axis];
  auto norm = [n](int64_t v) {
    if (v < 0) v += n;
    return std::clamp<int64_t>(v, 0, n);
  };
  const int64_t s = norm(start), e = norm(end);
  std::vector<int64_t> picks;
  for (int64_t i = s; i < e; i += step) picks.push_back(i);
  Dims shape = x.shape;
  shape[axis] = static_cast<int64_t>(picks.size());
  NDArray y = f64(shape);
  for (int64_t k = 0; k < y.numel(); ++k) {
    Dims idx = unravel(k, shape);
    idx[axis] = picks[idx[axis]];
    y.set(k, x.get(ravel(idx, x.shape)));
  }
  return y;
}

inline NDArray pad(const NDArray& x, const std::vector<std::pair<int64_t, int64_t>>& pads,
                   double value) {
  Dims shape = x.shape;
  for (size_t d = 0; d < shape.size(); ++d) shape[d] += pads[d].first + pads[d].second;
  NDArray y = f64(shape);
  y.fill(value);
  for (int64_t k = 0; k < x.numel(); ++k) {
    Dims idx = unravel(k, x.shape);
    for (size_t d = 0; d < idx.size(); ++d) idx[d] += pads[d].first;
    y.set(ravel(idx, shape), x.get(k));
  }
  return y;
}

inline NDArray broadcast_to(const NDArray& x, const Dims& shape) {
  NDArray y = f64(shape);
  for (int64_t k = 0; k < y.numel(); ++k)
    y.set(k, x.get(broadcast_flat(unravel(k, shape), x.shape)));
  return y;
}

}  // namespace tessera::naive

namespace tessera::optest {

using runtime::NDArray;

// Runs the reference interpreter on one output with (placeholder, array) inputs.
inline NDArray reference(const ir::Tensor& out,
                         const std::vector<std::pair<ir::Tensor, const NDArray*>>& inputs,
                         const std::map<const ir::ExprNode*, int64_t>& sizes = {}) {
  std::map<const ir::TensorNode*, NDArray> in;
  for (const auto& [t, a] : inputs) in.emplace(t.get(), *a);
  return ops::run_reference({out}, in, sizes).at(0);
}

// gtest assertion: arrays have equal shapes and close values (want is the naive result).
inline ::testing::AssertionResult all_close(const NDArray& got, const NDArray& want,
                                            double rtol = 1e-5, double atol = 1e-6) {
  runtime::CompareResult r = runtime::allclose(got, want, rtol, atol);
  if (r.ok) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << r.message;
}

// Random float32 input with a fixed seed.
inline NDArray rand(const std::vector<int64_t>& shape, uint64_t seed, double lo = -1.0,
                    double hi = 1.0) {
  return NDArray::random(ir::DType::kFloat32, shape, seed, lo, hi);
}

// Constant-extent shape for placeholders.
inline std::vector<ir::Expr> dims(const std::vector<int64_t>& s) {
  std::vector<ir::Expr> out;
  for (int64_t d : s) out.push_back(ir::int_imm(d));
  return out;
}

// Expects `f` to throw tessera::Error whose message contains `needle`.
template <typename F>
::testing::AssertionResult throws_with(F&& f, const std::string& needle) {
  try {
    f();
  } catch (const Error& e) {
    if (std::string(e.what()).find(needle) != std::string::npos) {
      return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure() << "message '" << e.what() << "' lacks '" << needle << "'";
  }
  return ::testing::AssertionFailure() << "no tessera::Error thrown";
}

}  // namespace tessera::optest
