// Randomised check of the simplifier and the bound analysis against direct evaluation.
//
// Every case builds a random integer (or boolean) expression over 3-4 variables with random
// bounds (negative ranges, size variables, single-value ranges), simplifies it, and evaluates
// the original and the simplified expression on random assignments within the bounds. The bound
// analysis is checked on the same assignments: every evaluated value must lie inside
// const_int_bound of the expression.
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <vector>

#include "ir/eval.h"
#include "ir/printer.h"
#include "ir/simplify.h"

namespace tessera::ir {
namespace {

struct VarSpec {
  Var v;
  int64_t lo, hi;  // range the assignments are drawn from (may be narrower than v's own)
};

class ExprGen {
 public:
  explicit ExprGen(uint64_t seed) : rng_(seed) {}

  int64_t uniform(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }
  bool chance(double p) { return std::bernoulli_distribution(p)(rng_); }

  std::vector<VarSpec> make_vars() {
    std::vector<VarSpec> vars;
    int count = static_cast<int>(uniform(3, 4));
    for (int k = 0; k < count; ++k) {
      std::string name = std::string(1, static_cast<char>('a' + k));
      int kind = static_cast<int>(uniform(0, 5));
      int64_t lo, hi;
      Var v;
      if (kind <= 1) {  // loop-iterator-like range [0, extent)
        lo = 0;
        hi = pick_extent() - 1;
        v = var(name, lo, hi);
      } else if (kind == 2) {  // range crossing zero
        lo = -uniform(1, 40);
        hi = uniform(-1, 40);
        if (hi < lo) hi = lo;
        v = var(name, lo, hi);
      } else if (kind == 3) {  // symbolic size
        lo = uniform(1, 8);
        hi = lo + uniform(0, 60);
        v = size_var(name, lo, hi);
      } else if (kind == 4) {  // single value
        lo = hi = uniform(-5, 20);
        v = var(name, lo, hi);
      } else {  // negative range
        hi = -uniform(0, 20);
        lo = hi - uniform(0, 30);
        v = var(name, lo, hi);
      }
      vars.push_back({v, lo, hi});
    }
    vars_ = vars;
    return vars;
  }

  int64_t pick_extent() {
    static const int64_t kExtents[] = {1, 2, 3, 4, 7, 8, 15, 16, 17, 31, 32, 64, 100};
    return kExtents[uniform(0, 12)];
  }

  int64_t pick_divisor() {
    static const int64_t kDivisors[] = {1, 2, 3, 4, 5, 8, 16, 32, 7, 6, 12, 64};
    return kDivisors[uniform(0, 11)];
  }

  Expr leaf() {
    if (chance(0.8)) return vars_[uniform(0, static_cast<int64_t>(vars_.size()) - 1)].v;
    return int_imm(uniform(-20, 20));
  }

  // An index-like sum: coefficients are often multiples of `c`, the shape tiling produces.
  Expr affine(int64_t c) {
    Expr e = int_imm(chance(0.5) ? 0 : uniform(-2 * c, 2 * c));
    int terms = static_cast<int>(uniform(1, 3));
    for (int t = 0; t < terms; ++t) {
      int64_t coef = chance(0.6) ? c * uniform(-2, 3) : uniform(-4, 20);
      e = e + leaf() * int_imm(coef);
    }
    return e;
  }

  Expr cond(int depth) {
    int k = static_cast<int>(uniform(0, 9));
    if (depth <= 0 || k < 6) {
      Expr a = gen(depth - 1), b = gen(depth - 1);
      switch (k % 6) {
        case 0:
          return lt(a, b);
        case 1:
          return le(a, b);
        case 2:
          return gt(a, b);
        case 3:
          return ge(a, b);
        case 4:
          return eq(a, b);
        default:
          return ne(a, b);
      }
    }
    if (k == 6) return logical_and(cond(depth - 1), cond(depth - 1));
    if (k == 7) return logical_or(cond(depth - 1), cond(depth - 1));
    return logical_not(cond(depth - 1));
  }

  // select(v*k + b  op  c, f(v), g(v)): branch bodies whose simplification depends on the bound
  // the condition implies for v, right at the boundary (off-by-one errors show up here).
  Expr guarded() {
    const VarSpec& s = vars_[uniform(0, static_cast<int64_t>(vars_.size()) - 1)];
    Expr v = s.v;
    int64_t c = uniform(s.lo - 1, s.hi + 1);
    int64_t k = chance(0.7) ? 1 : uniform(-3, 3);
    Expr lhs = k == 0 ? v : v * int_imm(k) + int_imm(uniform(-2, 2));
    Expr cond;
    switch (uniform(0, 5)) {
      case 0:
        cond = lt(lhs, int_imm(c));
        break;
      case 1:
        cond = le(lhs, int_imm(c));
        break;
      case 2:
        cond = gt(lhs, int_imm(c));
        break;
      case 3:
        cond = ge(lhs, int_imm(c));
        break;
      case 4:
        cond = eq(lhs, int_imm(c));
        break;
      default:
        cond = ne(lhs, int_imm(c));
        break;
    }
    if (chance(0.3)) cond = logical_not(cond);
    auto arm = [&]() -> Expr {
      int64_t d = std::max<int64_t>(1, std::abs(c) + uniform(0, 1));
      switch (uniform(0, 5)) {
        case 0:
          return floordiv(v, int_imm(d));
        case 1:
          return floormod(v, int_imm(d));
        case 2:
          return min(v, int_imm(c));
        case 3:
          return max(v, int_imm(c - 1));
        case 4:
          return select(lt(v, int_imm(c)), int_imm(1), int_imm(2));
        default:
          return v * int_imm(3) - int_imm(c);
      }
    };
    return select(cond, arm(), arm());
  }

  Expr gen(int depth) {
    if (depth <= 0) return leaf();
    int k = static_cast<int>(uniform(0, 16));
    switch (k) {
      case 0:
        return gen(depth - 1) + gen(depth - 1);
      case 1:
        return gen(depth - 1) - gen(depth - 1);
      case 2:
        return gen(depth - 1) * int_imm(uniform(-4, 17));
      case 3:
        return gen(depth - 1) * leaf();  // non-linear product
      case 4:
      case 5:
        return floordiv(gen(depth - 1), int_imm(pick_divisor()));
      case 6:
      case 7:
        return floormod(gen(depth - 1), int_imm(pick_divisor()));
      case 8: {  // tiling patterns: (x*c + y) // c, (x*c + y) % c
        int64_t c = pick_divisor();
        Expr a = affine(c);
        return chance(0.5) ? floordiv(a, int_imm(c)) : floormod(a, int_imm(c));
      }
      case 9: {  // split and rejoin: x // c * c + x % c
        int64_t c = pick_divisor();
        Expr x = gen(depth - 1);
        return floordiv(x, int_imm(c)) * int_imm(c) + floormod(x, int_imm(c));
      }
      case 10:
        return min(gen(depth - 1), gen(depth - 1));
      case 11:
        return max(gen(depth - 1), gen(depth - 1));
      case 12:
        return select(cond(depth - 1), gen(depth - 1), gen(depth - 1));
      case 13: {  // nested divisions
        Expr x = gen(depth - 1);
        int64_t a = pick_divisor(), b = pick_divisor();
        if (chance(0.5)) return floordiv(floordiv(x, int_imm(a)), int_imm(b));
        return floormod(floormod(x, int_imm(a * b)), int_imm(a));
      }
      case 14: {  // division by a symbolic size (positive lower bound)
        for (const VarSpec& s : vars_) {
          if (s.lo >= 1) {
            Expr x = gen(depth - 1) + s.v * gen(depth - 1);
            return chance(0.5) ? floordiv(x, s.v) : floormod(x, s.v);
          }
        }
        return gen(depth - 1);
      }
      case 15:
        return guarded();
      default:
        return affine(pick_divisor());
    }
  }

  std::mt19937_64& rng() { return rng_; }

 private:
  std::mt19937_64 rng_;
  std::vector<VarSpec> vars_;
};

struct FuzzStats {
  int cases = 0;
  int changed = 0;
  int evaluations = 0;
};

// Simplifies `e`, then evaluates it and its simplified form on random assignments drawn from the
// ranges in `vars`; a mismatch, or a value outside either const_int_bound, is a fatal failure.
void check_case(ExprGen& g, const std::vector<VarSpec>& vars, const Expr& e, const BoundMap* extra,
                FuzzStats* stats) {
  Expr s = simplify(e, extra);
  ConstIntBound be = const_int_bound(e, extra);
  ConstIntBound bs = const_int_bound(s, extra);
  stats->cases++;
  if (!s.same_as(e)) stats->changed++;
  EvalEnv env;
  for (int trial = 0; trial < 24; ++trial) {
    for (const VarSpec& v : vars) {
      // Corners first (where off-by-one errors live), then uniform samples.
      int64_t x = trial == 0 ? v.lo : trial == 1 ? v.hi : g.uniform(v.lo, v.hi);
      env.vars[v.v.get()] = Scalar::of_int(x);
    }
    int64_t want = evaluate(e, env).i;
    int64_t got = evaluate(s, env).i;
    stats->evaluations++;
    std::string ctx;
    if (want != got || want < be.lo || want > be.hi || want < bs.lo || want > bs.hi) {
      for (const VarSpec& v : vars) {
        ctx += v.v->name + "=" + std::to_string(env.vars[v.v.get()].i) + " in [" +
               std::to_string(v.lo) + ", " + std::to_string(v.hi) + "]; ";
      }
    }
    ASSERT_EQ(want, got) << "original:   " << to_string(e) << "\nsimplified: " << to_string(s)
                         << "\nat " << ctx;
    ASSERT_GE(want, be.lo) << to_string(e) << " at " << ctx;
    ASSERT_LE(want, be.hi) << to_string(e) << " at " << ctx;
    ASSERT_GE(want, bs.lo) << to_string(s) << " at " << ctx;
    ASSERT_LE(want, bs.hi) << to_string(s) << " at " << ctx;
  }
}

TEST(SimplifyFuzz, IntegerExpressionsMatchEvaluation) {
  ExprGen g(20240601);
  FuzzStats stats;
  for (int c = 0; c < 10000; ++c) {
    std::vector<VarSpec> vars = g.make_vars();
    Expr e = g.gen(static_cast<int>(g.uniform(1, 4)));
    check_case(g, vars, e, nullptr, &stats);
    if (HasFatalFailure()) return;
  }
  // The simplifier must not be a no-op on this workload.
  EXPECT_GT(stats.changed, stats.cases / 2);
}

TEST(SimplifyFuzz, BooleanExpressionsMatchEvaluation) {
  ExprGen g(777);
  FuzzStats stats;
  for (int c = 0; c < 4000; ++c) {
    std::vector<VarSpec> vars = g.make_vars();
    Expr e = g.cond(static_cast<int>(g.uniform(1, 3)));
    check_case(g, vars, e, nullptr, &stats);
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(stats.changed, stats.cases / 2);
}

TEST(SimplifyFuzz, ExtraBoundsOverrideVariableBounds) {
  // Loop-IR style: variables declared unbounded (or wide), the real range comes from a BoundMap.
  ExprGen g(99);
  FuzzStats stats;
  for (int c = 0; c < 2000; ++c) {
    std::vector<VarSpec> vars = g.make_vars();
    BoundMap extra;
    std::vector<VarSpec> narrowed;
    for (const VarSpec& v : vars) {
      VarSpec n = v;
      if (g.chance(0.6)) {
        n.lo = g.uniform(v.lo, v.hi);
        n.hi = g.uniform(n.lo, v.hi);
        extra[v.v.get()] = ConstIntBound{n.lo, n.hi};
      }
      narrowed.push_back(n);
    }
    Expr e = g.chance(0.8) ? g.gen(static_cast<int>(g.uniform(1, 4))) : g.cond(2);
    check_case(g, narrowed, e, &extra, &stats);
    if (HasFatalFailure()) return;
  }
}

TEST(SimplifyFuzz, SimplifyIsIdempotent) {
  // A second run must not find anything left to do: the output is a canonical form.
  ExprGen g(4242);
  int cases = 0, stable = 0;
  for (int c = 0; c < 3000; ++c) {
    g.make_vars();
    Expr s = simplify(g.gen(static_cast<int>(g.uniform(1, 4))));
    Expr s2 = simplify(s);
    ++cases;
    if (to_string(s) == to_string(s2)) {
      ++stable;
    } else {
      ADD_FAILURE() << to_string(s) << "\n  -> " << to_string(s2);
    }
  }
  EXPECT_EQ(stable, cases);
}

}  // namespace
}  // namespace tessera::ir
