// Loop-IR simplification: structure checks on hand-built nests, and execution checks (a tiny
// reference executor in this file runs the nest before and after; stores must be identical).
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "ir/buffer.h"
#include "ir/eval.h"
#include "ir/printer.h"
#include "loop/printer.h"
#include "loop/simplify_stmt.h"

namespace tessera::loop {
namespace {

using ir::int_imm;

// Serial executor over integer buffers stored sparsely (any index is valid), recording every
// store in order. Written independently of the pass under test.
class MiniExec {
 public:
  std::vector<std::tuple<std::string, int64_t, int64_t>> log;

  void run(const Stmt& s) {
    switch (s->kind) {
      case StmtKind::kNop:
        return;
      case StmtKind::kSeq:
        for (const Stmt& c : s->seq) run(c);
        return;
      case StmtKind::kFor: {
        int64_t lo = eval(s->min), n = eval(s->extent);
        for (int64_t i = lo; i < lo + n; ++i) {
          env_.vars[s->var.get()] = ir::Scalar::of_int(i);
          run(s->body);
        }
        env_.vars.erase(s->var.get());
        return;
      }
      case StmtKind::kLet:
        env_.vars[s->var.get()] = ir::Scalar::of_int(eval(s->value));
        run(s->body);
        env_.vars.erase(s->var.get());
        return;
      case StmtKind::kIf:
        if (eval(s->cond)) {
          run(s->then_case);
        } else if (s->else_case) {
          run(s->else_case);
        }
        return;
      case StmtKind::kStore: {
        int64_t idx = eval(s->index), v = eval(s->value);
        mem_[{s->buffer->name, idx}] = v;
        log.emplace_back(s->buffer->name, idx, v);
        return;
      }
      case StmtKind::kAllocate:
        run(s->body);
        return;
      case StmtKind::kPrefetch:  // logged with its level in place of a value
        log.emplace_back("prefetch " + s->buffer->name, eval(s->index), s->cache_level);
        return;
      case StmtKind::kParallelCall:  // simplify_stmt runs before parallel loops are outlined
        FAIL() << "parallel call in a simplifier test";
      case StmtKind::kBarrier:
        FAIL() << "barrier in a simplifier test";
    }
  }

  void set(const Var& v, int64_t x) { env_.vars[v.get()] = ir::Scalar::of_int(x); }

 private:
  int64_t eval(const Expr& e) {
    env_.read_buffer = [this](const ir::BufferNode& b, int64_t i) {
      auto it = mem_.find({b.name, i});
      return ir::Scalar::of_int(it == mem_.end() ? i * 7 + 1 : it->second);
    };
    return ir::evaluate(e, env_).i;
  }
  ir::EvalEnv env_;
  std::map<std::pair<std::string, int64_t>, int64_t> mem_;
};

void expect_same_stores(const Stmt& a, const Stmt& b,
                        const std::vector<std::pair<Var, int64_t>>& sizes = {}) {
  MiniExec x, y;
  for (auto& [v, n] : sizes) {
    x.set(v, n);
    y.set(v, n);
  }
  x.run(a);
  y.run(b);
  ASSERT_EQ(x.log, y.log) << "before:\n" << to_string(a) << "\nafter:\n" << to_string(b);
}

ir::Buffer buf(const std::string& name) {
  return ir::make_buffer(name, ir::DType::kInt64, {int_imm(1 << 20)});
}

TEST(SimplifyStmt, TiledGuardsAndIndicesCollapse) {
  // for i_o in [0, 32): for i_i in [0, 32): if (i_o*32 + i_i < 1024) B[((i_o*32+i_i)//16)*16 +
  // (i_o*32+i_i)%16] = A[i_o*32 + i_i]
  ir::Buffer A = buf("A"), B = buf("B");
  Var io = ir::var("i_o"), ii = ir::var("i_i");  // unbounded: bounds come from the loops
  Expr i = io * 32 + ii;
  Expr idx = ir::floordiv(i, 16) * 16 + ir::floormod(i, 16);
  Stmt nest = make_for(io, int_imm(0), int_imm(32), ForKind::kParallel,
                       make_for(ii, int_imm(0), int_imm(32), ForKind::kSerial,
                                make_if(ir::lt(i, 1024), make_store(B, idx, ir::load(A, i)))));
  Stmt s = simplify_stmt(nest);
  EXPECT_EQ(to_string(s),
            "parallel for i_o in [0, 32):\n"
            "  for i_i in [0, 32):\n"
            "    B[i_o * 32 + i_i] = A[i_o * 32 + i_i]");
  expect_same_stores(nest, s);
}

TEST(SimplifyStmt, PrefetchIndicesAreSimplifiedAndTheHintKept) {
  ir::Buffer A = buf("A");
  Var io = ir::var("i_o"), ii = ir::var("i_i");
  Expr i = io * 16 + ii;
  Expr idx = ir::floordiv(i, 16) * 16 + ir::floormod(i, 16) + 64;
  Stmt nest =
      make_for(io, int_imm(0), int_imm(4), ForKind::kSerial,
               make_for(ii, int_imm(0), int_imm(16), ForKind::kSerial, make_prefetch(A, idx, 2)));
  Stmt s = simplify_stmt(nest);
  EXPECT_EQ(to_string(s),
            "for i_o in [0, 4):\n"
            "  for i_i in [0, 16):\n"
            "    prefetch_l2 A[i_o * 16 + i_i + 64]");
  expect_same_stores(nest, s);
}

TEST(SimplifyStmt, UnprovableGuardsStay) {
  ir::Buffer B = buf("B");
  Var io = ir::var("i_o"), ii = ir::var("i_i");
  Expr i = io * 32 + ii;
  Stmt nest = make_for(io, int_imm(0), int_imm(32), ForKind::kSerial,
                       make_for(ii, int_imm(0), int_imm(32), ForKind::kSerial,
                                make_if(ir::lt(i, 1000), make_store(B, i, ii))));
  Stmt s = simplify_stmt(nest);
  ASSERT_EQ(s->kind, StmtKind::kFor);
  ASSERT_EQ(s->body->body->kind, StmtKind::kIf);
  expect_same_stores(nest, s);
}

TEST(SimplifyStmt, EmptyAndSingleIterationLoops) {
  ir::Buffer B = buf("B");
  Var i = ir::var("i"), j = ir::var("j"), k = ir::var("k");
  // Extent 0: gone.
  Stmt zero = make_for(i, int_imm(0), int_imm(0), ForKind::kSerial, make_store(B, i, i));
  EXPECT_EQ(simplify_stmt(zero)->kind, StmtKind::kNop);
  // Extent provably <= 0 through bounds: for j in [0, 4): for k in [0, j - 4): ...
  Stmt neg = make_for(j, int_imm(0), int_imm(4), ForKind::kSerial,
                      make_for(k, int_imm(0), j - 4, ForKind::kSerial, make_store(B, k, k)));
  EXPECT_EQ(simplify_stmt(neg)->kind, StmtKind::kNop);
  // Extent 1 with a constant min: substituted.
  Stmt one = make_for(
      i, int_imm(0), int_imm(8), ForKind::kSerial,
      make_for(j, int_imm(3), int_imm(1), ForKind::kVectorized, make_store(B, i * 4 + j, j)));
  Stmt s = simplify_stmt(one);
  EXPECT_EQ(to_string(s), "for i in [0, 8):\n  B[i * 4 + 3] = 3");
  expect_same_stores(one, s);
  // Extent 1 with a computed min: becomes a let.
  Stmt let_like = make_for(i, int_imm(0), int_imm(8), ForKind::kSerial,
                           make_for(j, i * 2, int_imm(1), ForKind::kSerial, make_store(B, j, j)));
  Stmt sl = simplify_stmt(let_like);
  EXPECT_EQ(to_string(sl), "for i in [0, 8):\n  let j = i * 2\n  B[j] = j");
  expect_same_stores(let_like, sl);
}

TEST(SimplifyStmt, IfWithConstantConditionKeepsTheRightBranch) {
  ir::Buffer B = buf("B");
  Var i = ir::var("i");
  Stmt s =
      make_for(i, int_imm(0), int_imm(10), ForKind::kSerial,
               make_if(ir::ge(i, 10), make_store(B, i, int_imm(1)), make_store(B, i, int_imm(2))));
  Stmt r = simplify_stmt(s);
  EXPECT_EQ(to_string(r), "for i in [0, 10):\n  B[i] = 2");
  expect_same_stores(s, r);
  // An if whose taken branch is empty disappears; an empty then-branch flips the condition.
  Stmt only_else = make_for(i, int_imm(0), int_imm(10), ForKind::kSerial,
                            make_if(ir::lt(i, 5), make_nop(), make_store(B, i, i)));
  Stmt oe = simplify_stmt(only_else);
  EXPECT_EQ(to_string(oe), "for i in [0, 10):\n  if 4 < i:\n    B[i] = i");
  expect_same_stores(only_else, oe);
}

TEST(SimplifyStmt, BranchConditionsNarrowBounds) {
  ir::Buffer B = buf("B");
  Var i = ir::var("i");
  Stmt s = make_for(i, int_imm(0), int_imm(64), ForKind::kSerial,
                    make_if(ir::lt(i, 16), make_store(B, ir::floordiv(i, 16), i),
                            make_store(B, ir::floordiv(i, 16), int_imm(0))));
  Stmt r = simplify_stmt(s);
  EXPECT_EQ(to_string(r),
            "for i in [0, 64):\n"
            "  if i < 16:\n"
            "    B[0] = i\n"
            "  else:\n"
            "    B[i // 16] = 0");
  expect_same_stores(s, r);
}

TEST(SimplifyStmt, LetsAndSymbolicExtents) {
  ir::Buffer B = buf("B");
  Var n = ir::size_var("n", 1, 1000);
  Var io = ir::var("i_o"), ii = ir::var("i_i"), t = ir::var("t"), c = ir::var("c");
  // Partial last tile: for i_o in [0, (n + 31) // 32): for i_i in [0, min(32, n - i_o*32)):
  Expr extent = ir::min(int_imm(32), n - io * 32);
  Stmt body = make_let(
      c, int_imm(5),
      make_let(t, io * 32 + ii, make_if(ir::lt(t, n), make_store(B, ir::floormod(t, 32), ii + c))));
  Stmt nest = make_for(io, int_imm(0), ir::floordiv(n + 31, 32), ForKind::kSerial,
                       make_for(ii, int_imm(0), extent, ForKind::kSerial, body));
  Stmt r = simplify_stmt(nest);
  // The constant let is substituted; t keeps its let; t % 32 uses t's bounds only (it cannot
  // see through the let), so it stays.
  EXPECT_EQ(to_string(r),
            "for i_o in [0, (n + 31) // 32):\n"
            "  for i_i in [0, min(n - i_o * 32, 32)):\n"
            "    let t = i_o * 32 + i_i\n"
            "    if t < n:\n"
            "      B[t % 32] = i_i + 5");
  for (int64_t nv : {1, 31, 32, 33, 100}) expect_same_stores(nest, r, {{n, nv}});
}

TEST(SimplifyStmt, AllocationsOfEmptyBodiesAndGpuLoops) {
  ir::Buffer B = buf("B");
  ir::Buffer tmp = ir::make_buffer("tmp", ir::DType::kInt64, {int_imm(4)}, ir::MemScope::kStack);
  Var i = ir::var("i");
  Stmt dead = make_allocate(
      tmp, make_for(i, int_imm(0), int_imm(0), ForKind::kSerial, make_store(tmp, i, i)));
  EXPECT_EQ(simplify_stmt(dead)->kind, StmtKind::kNop);
  // GPU-bound loops define the launch grid: kept even with extent 1.
  Stmt gpu = make_for(i, int_imm(0), int_imm(1), ForKind::kGpuBlockX, make_store(B, i, i));
  Stmt g = simplify_stmt(gpu);
  ASSERT_EQ(g->kind, StmtKind::kFor);
  EXPECT_EQ(g->for_kind, ForKind::kGpuBlockX);
}

// Random nests of tiled loops, guards, lets and single-iteration loops; the executor must see
// the same stores before and after.
TEST(SimplifyStmt, RandomNestsKeepTheirStores) {
  std::mt19937_64 rng(12345);
  auto uni = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  ir::Buffer B = buf("B");
  int changed = 0;
  for (int c = 0; c < 300; ++c) {
    std::vector<Var> live;
    std::function<Stmt(int)> gen = [&](int depth) -> Stmt {
      auto index = [&]() {
        Expr e = int_imm(uni(0, 3));
        for (const Var& v : live) e = e + v * int_imm(uni(0, 2) == 0 ? 1 : uni(1, 16));
        int64_t d = uni(1, 16);
        switch (uni(0, 3)) {
          case 0:
            return ir::floordiv(e, d);
          case 1:
            return ir::floormod(e, d) + ir::floordiv(e, d) * d;
          case 2:
            return ir::floormod(e, d);
          default:
            return e;
        }
      };
      int k = static_cast<int>(depth <= 0 ? 0 : uni(0, 5));
      switch (k) {
        case 0:
          return make_store(B, index(), index());
        case 1:
        case 2: {
          Var v = ir::var("v" + std::to_string(live.size()));
          int64_t ext = uni(0, 4) == 0 ? uni(0, 1) : uni(2, 6);
          Expr mn = live.empty() || uni(0, 1) ? Expr(int_imm(uni(-2, 3))) : index();
          live.push_back(v);
          Stmt body = gen(depth - 1);
          live.pop_back();
          return make_for(v, mn, int_imm(ext), ForKind::kSerial, body);
        }
        case 3: {
          Expr lhs = index(), rhs = index();
          Stmt t = gen(depth - 1);
          Stmt e = uni(0, 1) ? gen(depth - 1) : nullptr;
          return make_if(uni(0, 1) ? ir::lt(lhs, rhs) : ir::lt(lhs, int_imm(uni(0, 40))), t, e);
        }
        case 4: {
          Var v = ir::var("t" + std::to_string(live.size()));
          Expr value = uni(0, 2) == 0 ? Expr(int_imm(uni(0, 9))) : index();
          live.push_back(v);
          Stmt body = gen(depth - 1);
          live.pop_back();
          return make_let(v, value, body);
        }
        default:
          return make_seq({gen(depth - 1), gen(depth - 1)});
      }
    };
    Stmt s = gen(static_cast<int>(uni(2, 5)));
    Stmt r = simplify_stmt(s);
    if (to_string(r) != to_string(s)) ++changed;
    expect_same_stores(s, r);
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(changed, 100);
}

}  // namespace
}  // namespace tessera::loop
