// Differential test of the LLVM backend: random loop-IR kernels (vectorized, unrolled and serial
// loops; affine, gathered and indirect indices; lets; varying ifs; lazy selects; reads of the
// buffer being written) run through the JIT and through the reference interpreter
// (loop/interpreter.h, which executes every loop serially), and must agree.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "codegen/llvm/compile.h"
#include "loop/interpreter.h"
#include "loop/printer.h"
#include "test_llvm_util.h"

namespace tessera::codegen::llvm_test {
namespace {

constexpr int64_t kSize = 4096;  // elements of every float buffer
constexpr int64_t kIdx = 256;    // elements of the index buffer

class KernelFuzzer {
 public:
  explicit KernelFuzzer(uint32_t seed) : rng_(seed) {}

  bool vectorized() const { return kind_ == ForKind::kVectorized; }

  LoweredFunc make(const std::string& name) {
    A_ = ir::make_buffer("A", DType::kFloat32, {Expr(kSize)});
    B_ = ir::make_buffer("B", DType::kFloat32, {Expr(kSize)});
    I_ = ir::make_buffer("I", DType::kInt32, {Expr(kIdx)});
    out_ = ir::make_buffer("out", DType::kFloat32, {Expr(kSize)});
    out2_ = ir::make_buffer("out2", DType::kFloat32, {Expr(kSize)});
    lanes_ = pick({4, 8, 16});
    outer_ = pick({1, 3, 8});
    io_ = loop_var("io");
    ii_ = loop_var("ii");
    base_ = io_ * lanes_ + ii_;  // < 128
    // Half of the kernels are "clean": no reads of the output buffers and at most one store per
    // output buffer, so vectorized loops mostly stay SIMD; the others provoke dependences.
    clean_ = coin(0.5);
    stores_ = 0;
    kind_ =
        pick({ForKind::kVectorized, ForKind::kVectorized, ForKind::kUnrolled, ForKind::kSerial});
    Stmt body = random_body(2);
    Stmt inner = loop(ii_, Expr(0), Expr(lanes_), kind_, body);
    return make_func(name, {A_, B_, I_, out_, out2_}, {}, serial(io_, outer_, inner));
  }

 private:
  template <typename T>
  T pick(std::initializer_list<T> xs) {
    std::uniform_int_distribution<size_t> d(0, xs.size() - 1);
    return *(xs.begin() + d(rng_));
  }
  bool coin(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }

  // An in-bounds index for a float buffer: affine in the lane (strides -2..3), gathered through
  // the index buffer, or non-linear (floormod/floordiv), plus an optional uniform term.
  Expr index() {
    Expr inner;
    switch (pick({0, 0, 0, 1, 2, 3})) {
      case 0:
        inner = base_ * pick<int64_t>({-2, -1, 0, 1, 1, 2, 3});
        break;
      case 1:
        inner = ir::cast(DType::kInt64, ld(I_, ir::floormod(base_ * 5, kIdx)));
        break;
      case 2:
        inner = ir::floormod(base_ * 7, 97);
        break;
      default:
        inner = ir::floordiv(base_, 3);
        break;
    }
    return inner + io_ * pick<int64_t>({0, 0, 1, 5}) + Expr(pick<int64_t>({1200, 2000, 3000}));
  }

  Expr value(int depth) {
    if (depth == 0 || coin(0.3)) {
      switch (pick({0, 0, 1, 1, 2, 3, 4})) {
        case 0:
          return ld(A_, index());
        case 1:
          return ld(B_, index());
        case 2:
          return clean_ ? ld(A_, index()) : ld(coin(0.5) ? out_ : out2_, index());
        case 3:
          return ir::cast(DType::kFloat32, base_) * f32(0.01);
        default:
          return f32(pick({0.5, -1.25, 3.0}));
      }
    }
    Expr a = value(depth - 1), b = value(depth - 1);
    switch (pick({0, 1, 2, 3, 4, 5, 6, 7})) {
      case 0:
        return a + b;
      case 1:
        return a - b * f32(0.5);
      case 2:
        return a * b;
      case 3:
        return ir::max(a, b);
      case 4:
        return ir::min(a, b);
      case 5:
        return ir::tanh(a) + ir::exp(b * f32(0.1));
      case 6:
        return ir::select(ir::gt(a, b), a, b * f32(2));
      default:
        return ir::select(ir::lt(base_ * 3, Expr(lanes_ * outer_ * 2)), ld(A_, index()), b);
    }
  }

  Expr condition() {
    switch (pick({0, 1, 2})) {
      case 0:
        return ir::gt(ld(A_, index()), f32(0));
      case 1:
        return ir::eq(ir::floormod(base_, 3), Expr(0));
      default:
        return ir::lt(io_, Expr(2));  // lane-invariant
    }
  }

  Stmt random_body(int depth) {
    std::vector<Stmt> stmts;
    int n = pick({1, 1, 2, 3});
    for (int s = 0; s < n; ++s) {
      int kind = depth > 0 ? pick({0, 0, 1, 2, 3}) : 0;
      Buffer dst = coin(0.5) ? out_ : out2_;
      if (clean_) {
        if (stores_ >= 2) continue;
        dst = stores_++ == 0 ? out_ : out2_;
      }
      if (kind == 0) {
        stmts.push_back(store(dst, index(), value(2)));
      } else if (kind == 1) {
        Var t = ir::var("t", ir::kNoLowerBound, ir::kNoUpperBound, DType::kFloat32);
        Stmt use = store(dst, index(), Expr(t) * f32(1.5) + value(1));
        stmts.push_back(loop::make_let(t, value(2), loop::make_seq({use, random_body(depth - 1)})));
      } else if (kind == 2) {
        stmts.push_back(loop::make_if(condition(), random_body(depth - 1),
                                      coin(0.5) ? random_body(depth - 1) : nullptr));
      } else {
        Var u = loop_var("u");
        int64_t off = pick<int64_t>({8, 16, 40});
        stmts.push_back(
            unrolled(u, pick<int64_t>({2, 3}),
                     store(out_, index() + u * off,
                           ld(out_, index() + u * off) * f32(2) + ir::cast(DType::kFloat32, u))));
      }
    }
    return loop::make_seq(stmts);
  }

  std::mt19937 rng_;
  Buffer A_, B_, I_, out_, out2_;
  int64_t lanes_ = 16, outer_ = 1;
  ForKind kind_ = ForKind::kSerial;
  bool clean_ = false;
  int stores_ = 0;
  Var io_, ii_;
  Expr base_;
};

TEST(LlvmFuzz, JitMatchesInterpreter) {
  std::mt19937 data_rng(7);
  std::uniform_real_distribution<float> dist(-2, 2);
  std::vector<float> a(kSize), b(kSize), out0(kSize), out1(kSize);
  std::vector<int32_t> idx(kIdx);
  for (auto& x : a) x = dist(data_rng);
  for (auto& x : b) x = dist(data_rng);
  for (auto& x : out0) x = dist(data_rng);
  for (auto& x : out1) x = dist(data_rng);
  for (auto& x : idx) x = static_cast<int32_t>(data_rng() % kIdx);
  int simd = 0, scalar_fallback = 0;
  for (uint32_t seed = 1; seed <= 120; ++seed) {
    KernelFuzzer fuzzer(seed);
    LoweredFunc f = fuzzer.make("fuzz" + std::to_string(seed));
    auto k = compile_cpu(f);
    if (fuzzer.vectorized()) (k->notes().empty() ? simd : scalar_fallback)++;
    std::vector<float> got = out0, want = out0, got2 = out1, want2 = out1;
    call(*k, {a.data(), b.data(), idx.data(), got.data(), got2.data()}, {});
    loop::interpret(f, {a.data(), b.data(), idx.data(), want.data(), want2.data()}, {});
    got.insert(got.end(), got2.begin(), got2.end());
    want.insert(want.end(), want2.begin(), want2.end());
    for (size_t x = 0; x < got.size(); ++x) {
      bool both_nan = std::isnan(got[x]) && std::isnan(want[x]);
      ASSERT_TRUE(both_nan || std::fabs(got[x] - want[x]) <= 1e-4f * (1 + std::fabs(want[x])))
          << "seed " << seed << " element " << x << ": jit " << got[x] << ", interpreter "
          << want[x] << "\n"
          << loop::to_string(f) << (k->notes().empty() ? "" : "note: " + k->notes()[0]);
    }
  }
  std::printf("[ fuzz     ] vectorized loops: %d emitted as SIMD, %d as scalar fallback\n", simd,
              scalar_fallback);
  // Both paths must actually be exercised for the comparison to mean something.
  EXPECT_GT(simd, 10);
  EXPECT_GT(scalar_fallback, 5);
}

}  // namespace
}  // namespace tessera::codegen::llvm_test
