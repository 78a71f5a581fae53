// Layout primitives (layout/layout.h): every primitive's forward and inverse maps are exact
// inverses, forward is injective into the physical shape, holds_element marks exactly the
// positions with an element, and the div/mod simplifier keeps the maps' values (fuzzed over
// random shapes and random primitive sequences, checked point by point).
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

#include "ir/eval.h"
#include "ir/simplify.h"
#include "ir/structural_hash.h"
#include "layout/layout.h"
#include "util/check.h"

namespace tessera::layout {
namespace {

using ir::Expr;

std::vector<int64_t> eval_all(const std::vector<Expr>& es, const std::vector<Expr>& vars,
                              const std::vector<int64_t>& values) {
  ir::EvalEnv env;
  for (size_t k = 0; k < vars.size(); ++k) env.vars[vars[k].get()] = ir::Scalar::of_int(values[k]);
  std::vector<int64_t> out;
  for (const Expr& e : es) out.push_back(ir::evaluate(e, env).i);
  return out;
}

std::vector<Expr> index_vars(const std::vector<int64_t>& shape, const std::string& prefix) {
  std::vector<Expr> v;
  for (size_t d = 0; d < shape.size(); ++d) {
    v.push_back(ir::var(prefix + std::to_string(d), 0, shape[d] - 1));
  }
  return v;
}

// Every index of `shape`, row-major.
std::vector<std::vector<int64_t>> all_points(const std::vector<int64_t>& shape) {
  std::vector<std::vector<int64_t>> pts{{}};
  for (int64_t e : shape) {
    std::vector<std::vector<int64_t>> next;
    for (const auto& p : pts) {
      for (int64_t i = 0; i < e; ++i) {
        next.push_back(p);
        next.back().push_back(i);
      }
    }
    pts = std::move(next);
  }
  return pts;
}

bool inside(const std::vector<int64_t>& idx, const std::vector<int64_t>& shape) {
  for (size_t d = 0; d < idx.size(); ++d) {
    if (idx[d] < 0 || idx[d] >= shape[d]) return false;
  }
  return true;
}

// An independent model of a layout: the physical array of logical element ids (row-major id,
// -1 where no element is held), built by moving whole arrays primitive by primitive.
struct IdArray {
  std::vector<int64_t> shape;
  std::vector<int64_t> ids;  // row-major over shape

  int64_t at(const std::vector<int64_t>& idx) const {
    int64_t flat = 0;
    for (size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + idx[d];
    return ids[static_cast<size_t>(flat)];
  }
};

// The array after `p`: each output position reads the input position its definition names.
IdArray apply_naively(const Primitive& p, const IdArray& in) {
  IdArray out;
  out.shape = Layout(in.shape, {p}).physical_shape();
  const size_t d = static_cast<size_t>(p.dim);
  for (const auto& o : all_points(out.shape)) {
    std::vector<int64_t> src;  // the input position, or empty when there is none
    switch (p.kind) {
      case PrimitiveKind::kSplit:
        src.assign(o.begin(), o.begin() + p.dim);
        src.push_back(o[d] * p.args[0] + o[d + 1]);
        src.insert(src.end(), o.begin() + p.dim + 2, o.end());
        break;
      case PrimitiveKind::kReorder:
        src.resize(o.size());
        for (size_t k = 0; k < o.size(); ++k) src[static_cast<size_t>(p.args[k])] = o[k];
        break;
      case PrimitiveKind::kFuse:
        src.assign(o.begin(), o.begin() + p.dim);
        src.push_back(o[d] / in.shape[d + 1]);
        src.push_back(o[d] % in.shape[d + 1]);
        src.insert(src.end(), o.begin() + p.dim + 1, o.end());
        break;
      case PrimitiveKind::kUnfold:
        src.assign(o.begin(), o.begin() + p.dim);
        src.push_back(o[d] * p.args[1] * p.args[0] + o[d + 1]);  // tile start + offset
        src.insert(src.end(), o.begin() + p.dim + 2, o.end());
        break;
      case PrimitiveKind::kPad:
      case PrimitiveKind::kStoreAt:
        src = o;
        src[d] -= p.args[0];
        break;
    }
    out.ids.push_back(inside(src, in.shape) ? in.at(src) : -1);
  }
  return out;
}

IdArray naive_layout(const Layout& l) {
  IdArray a{l.logical_shape(), {}};
  const auto pts = all_points(a.shape);
  for (size_t k = 0; k < pts.size(); ++k) a.ids.push_back(static_cast<int64_t>(k));
  for (const Primitive& p : l.primitives()) a = apply_naively(p, a);
  return a;
}

// The exactness checks of the file comment, on every point of a (small) layout, against the
// naive model.
void expect_exact(const Layout& l) {
  SCOPED_TRACE(l.to_string());
  const IdArray naive = naive_layout(l);
  ASSERT_EQ(naive.shape, l.physical_shape());
  const std::vector<Expr> lv = index_vars(l.logical_shape(), "i");
  const std::vector<Expr> pv = index_vars(l.physical_shape(), "p");
  const std::vector<Expr> fwd = l.forward(lv), inv = l.inverse(pv);
  const Expr holds = l.holds_element(pv);
  std::vector<Expr> fwd_s, inv_s;
  for (const Expr& e : fwd) fwd_s.push_back(ir::simplify(e));
  for (const Expr& e : inv) inv_s.push_back(ir::simplify(e));
  const Expr holds_s = ir::simplify(holds);

  const auto logical_points = all_points(l.logical_shape());
  std::set<std::vector<int64_t>> images;
  for (size_t k = 0; k < logical_points.size(); ++k) {
    const std::vector<int64_t>& i = logical_points[k];
    const std::vector<int64_t> p = eval_all(fwd, lv, i);
    ASSERT_TRUE(inside(p, l.physical_shape()));
    EXPECT_EQ(naive.at(p), static_cast<int64_t>(k)) << "forward lands on another element";
    EXPECT_EQ(eval_all(fwd_s, lv, i), p) << "simplified forward differs";
    EXPECT_EQ(eval_all(inv, pv, p), i) << "inverse(forward(i)) != i";
    EXPECT_TRUE(images.insert(p).second) << "forward is not injective";
  }
  bool dense = true;
  for (const auto& p : all_points(l.physical_shape())) {
    const int64_t id = naive.at(p);
    const bool h = eval_all({holds}, pv, p)[0] != 0;
    dense = dense && id >= 0;
    EXPECT_EQ(h, id >= 0) << "holds_element wrong";
    EXPECT_EQ(eval_all({holds_s}, pv, p)[0] != 0, h) << "simplified holds_element differs";
    if (id < 0) continue;
    EXPECT_EQ(eval_all(inv, pv, p), logical_points[static_cast<size_t>(id)]) << "inverse wrong";
    EXPECT_EQ(eval_all(inv_s, pv, p), eval_all(inv, pv, p)) << "simplified inverse differs";
  }
  EXPECT_EQ(l.is_dense(), dense);
}

TEST(Layout, NamedLayoutsOfAConvolution) {
  // NCHW16c, NHWC, a weight O/o'.I/i'.KH.KW.i'.o', tiled output N.H/h.W/w.O/o.h.w.o.
  const std::vector<int64_t> act = {2, 32, 5, 6}, w = {32, 32, 3, 3};
  expect_exact(Layout::parse(act, "split(1,16) reorder(0,1,3,4,2)"));
  expect_exact(Layout::parse(act, "reorder(0,2,3,1)"));
  expect_exact(Layout::parse(w, "split(0,8) split(2,4) reorder(0,2,4,5,3,1)"));
  expect_exact(Layout::parse(act, "split(2,2) split(4,3) split(1,8) reorder(0,3,5,1,4,6,2)"));
  const Layout blocked = Layout::parse(act, "split(1,16) reorder(0,1,3,4,2)");
  EXPECT_EQ(blocked.physical_shape(), (std::vector<int64_t>{2, 2, 5, 6, 16}));
  EXPECT_TRUE(blocked.is_dense());
  EXPECT_EQ(blocked.to_string(), "split(1,16) reorder(0,1,3,4,2)");
}

TEST(Layout, UnfoldTileIsStrideTimesTileMinusOnePlusWindow) {
  // A 7x7 stride-2 window over 229 padded rows: 112 outputs; tiles of 8 outputs read
  // 2*(8-1)+7 = 21 rows, not the paper's 8+7-1 = 14, and start 16 rows apart.
  const Layout l({229}, {Primitive::unfold(0, 8, 2, 7)});
  EXPECT_EQ(l.physical_shape(), (std::vector<int64_t>{14, 21}));
  expect_exact(l);
  expect_exact(Layout({3, 17}, {Primitive::unfold(1, 3, 2, 3)}));
  expect_exact(Layout({11}, {Primitive::unfold(0, 4, 1, 3)}));         // stride 1: t + K - 1
  EXPECT_THROW(Layout({11}, {Primitive::unfold(0, 2, 2, 1)}), Error);  // window < stride
}

TEST(Layout, PaddingOverhangAndSharedSlotsHoldNoElement) {
  const Layout split({10, 3}, {Primitive::split(0, 4)});  // 10 = 4 + 4 + 2: overhang of 2
  EXPECT_FALSE(split.is_dense());
  expect_exact(split);
  const Layout pad({5, 4}, {Primitive::pad(1, 1, 2)});
  EXPECT_EQ(pad.physical_shape(), (std::vector<int64_t>{5, 7}));
  expect_exact(pad);
  const Layout shared({6}, {Primitive::store_at(0, 3, 12)});
  EXPECT_DOUBLE_EQ(shared.expansion(), 2.0);
  expect_exact(shared);
  EXPECT_THROW(Layout({6}, {Primitive::store_at(0, 7, 12)}), Error);
}

TEST(Layout, ParseRejectsMalformedText) {
  EXPECT_THROW(Layout::parse({4, 4}, "split(0,2"), Error);
  EXPECT_THROW(Layout::parse({4, 4}, "twist(0,2)"), Error);
  EXPECT_THROW(Layout::parse({4, 4}, "reorder(0,0)"), Error);
  EXPECT_THROW(Layout::parse({4, 4}, "fuse(1)"), Error);  // no dim after the last
  EXPECT_THROW(Layout::parse({4, 4}, "split(0,x)"), Error);
  EXPECT_TRUE(Layout::parse({4, 4}, "identity").is_identity());
  EXPECT_TRUE(Layout::parse({4, 4}, "").is_identity());
}

// A random primitive that fits `dims` (small factors, so every point can be enumerated).
Primitive random_primitive(std::mt19937_64& rng, const std::vector<int64_t>& dims) {
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  const int n = static_cast<int>(dims.size());
  const int d = static_cast<int>(pick(0, n - 1));
  switch (pick(0, 5)) {
    case 0:
      return Primitive::split(d, pick(1, 4));
    case 1: {
      std::vector<int64_t> perm(dims.size());
      for (int k = 0; k < n; ++k) perm[static_cast<size_t>(k)] = k;
      std::shuffle(perm.begin(), perm.end(), rng);
      return Primitive::reorder(perm);
    }
    case 2:
      if (n >= 2) return Primitive::fuse(static_cast<int>(pick(0, n - 2)));
      return Primitive::split(d, 2);
    case 3: {
      const int64_t window = pick(1, std::min<int64_t>(3, dims[static_cast<size_t>(d)]));
      return Primitive::unfold(d, pick(1, 3), pick(1, window), window);
    }
    case 4:
      return Primitive::pad(d, pick(0, 2), pick(0, 2));
    default: {
      const int64_t total = dims[static_cast<size_t>(d)] + pick(0, 3);
      return Primitive::store_at(d, pick(0, total - dims[static_cast<size_t>(d)]), total);
    }
  }
}

TEST(Layout, FuzzRandomPrimitiveSequencesAreExact) {
  std::mt19937_64 rng(20261124);
  int checked = 0;
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<int64_t> shape;
    const int ndim = static_cast<int>(std::uniform_int_distribution<int>(1, 3)(rng));
    for (int d = 0; d < ndim; ++d)
      shape.push_back(std::uniform_int_distribution<int64_t>(1, 7)(rng));
    std::vector<Primitive> prims;
    std::vector<int64_t> dims = shape;
    const int steps = std::uniform_int_distribution<int>(1, 4)(rng);
    for (int s = 0; s < steps; ++s) {
      prims.push_back(random_primitive(rng, dims));
      dims = Layout(shape, prims).physical_shape();
    }
    const Layout l(shape, prims);
    double points = 1;
    for (int64_t e : l.physical_shape()) points *= static_cast<double>(e);
    if (points > 4000) continue;
    expect_exact(l);
    EXPECT_EQ(Layout::parse(shape, l.to_string()), l);
    ++checked;
    if (HasFailure()) return;
  }
  EXPECT_GT(checked, 200);
}

TEST(Layout, SimplifierCollapsesForwardOfInverseForDenseSplitsAndReorders) {
  // p -> S(S^-1(p)) must be p again for the layouts the templates use, or every relaid read of
  // a relaid producer would divide in its inner loop.
  for (const char* text : {"split(1,16) reorder(0,1,3,4,2)", "reorder(0,2,3,1)",
                           "split(2,2) split(4,3) split(1,8) reorder(0,3,5,1,4,6,2)"}) {
    const Layout l = Layout::parse({2, 32, 4, 6}, text);
    const std::vector<Expr> pv = index_vars(l.physical_shape(), "p");
    const std::vector<Expr> round_trip = l.forward(l.inverse(pv));
    for (size_t d = 0; d < pv.size(); ++d) {
      EXPECT_TRUE(ir::structural_equal(ir::simplify(round_trip[d]), pv[d])) << text << " dim " << d;
    }
  }
}

}  // namespace
}  // namespace tessera::layout
