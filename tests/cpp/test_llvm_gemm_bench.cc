// GEMM throughput of a hand-written loop-IR kernel through the LLVM backend: B packed into
// 64-column panels, a 6 x 64 register-tiled micro-kernel (plus a 1 x 64 one for leftover rows),
// panels distributed over the thread pool. Disabled by default (timing, not correctness):
//   tessera_tests --gtest_also_run_disabled_tests --gtest_filter='*GemmBenchmark*'
// It still checks a sample of the result so a fast-but-wrong kernel cannot look good.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "codegen/llvm/compile.h"
#include "runtime/parallel.h"
#include "test_llvm_util.h"

namespace tessera::codegen::llvm_test {
namespace {

// C = A * B for row-major A[M,K], B[K,N], C[M,N]; N must be a multiple of 64.
LoweredFunc packed_gemm_func() {
  Var M = ir::size_var("M"), N = ir::size_var("N"), K = ir::size_var("K");
  Buffer A = ir::make_buffer("A", DType::kFloat32, {M, K});
  Buffer B = ir::make_buffer("B", DType::kFloat32, {K, N});
  Buffer C = ir::make_buffer("C", DType::kFloat32, {M, N});
  Expr panels = ir::floordiv(N, 64);
  Buffer Bp = ir::make_buffer("Bp", DType::kFloat32, {panels, K, Expr(64)}, ir::MemScope::kHeap);

  // Bp[jo, k, :] = B[k, jo*64 : jo*64+64]
  Var pj = loop_var("pj"), pk = loop_var("pk"), pv = loop_var("pv"), pl = loop_var("pl");
  Stmt pack = parallel(pj, panels,
                       serial(pk, K,
                              unrolled(pv, 4,
                                       vectorized(pl, 16,
                                                  store(Bp, (pj * K + pk) * 64 + pv * 16 + pl,
                                                        ld(B, pk * N + pj * 64 + pv * 16 + pl))))));

  // Compute, per 64-column panel (parallel): K in blocks of kKc so that the panel's kKc x 64
  // block of Bp (32 KiB) stays in L1 while every row block of A streams past it.
  const int64_t kKc = 128;
  Var jo = loop_var("jo"), kb = loop_var("kb"), io = loop_var("io"), r = loop_var("r");
  Expr kblocks = ir::floordiv(K + (kKc - 1), kKc);
  Expr k_lo = kb * kKc;
  Expr k_len = ir::min(Expr(kKc), K - k_lo);
  // Register tile of `rows` x 64 starting at row `row0`: acc = C (or 0 in the first K block),
  // acc += A[rows, k-block] * Bp[k-block, 64], C = acc.
  // A packed as Ap[io, k, 6] for the full 6-row blocks: the micro-kernel's broadcasts then read
  // one contiguous stream.
  Expr full = ir::floordiv(M, 6);
  Buffer Ap = ir::make_buffer("Ap", DType::kFloat32, {full, K, Expr(6)}, ir::MemScope::kHeap);
  Var ai = loop_var("ai"), ak = loop_var("ak"), ar = loop_var("ar");
  Stmt pack_a = parallel(
      ai, full,
      serial(ak, K,
             unrolled(ar, 6, store(Ap, (ai * K + ak) * 6 + ar, ld(A, (ai * 6 + ar) * K + ak)))));
  auto micro = [&](int rows, const std::string& tag, const std::function<Expr()>& row0) {
    Buffer acc = ir::make_buffer("acc" + tag, DType::kFloat32, {Expr(rows), Expr(64)},
                                 ir::MemScope::kRegister);
    Var k = loop_var("k" + tag);
    auto tile = [&](const std::string& t, const std::function<Stmt(Expr, Expr)>& body) {
      Var ii = loop_var("ii" + tag + t), jv = loop_var("jv" + tag + t),
          jl = loop_var("jl" + tag + t);
      return unrolled(ii, rows, unrolled(jv, 4, vectorized(jl, 16, body(ii, jv * 16 + jl))));
    };
    auto c_idx = [&](Expr ii, Expr j) { return (row0() + ii) * N + jo * 64 + j; };
    Stmt init = tile("i", [&](Expr ii, Expr j) {
      return store(acc, ii * 64 + j, ir::select(ir::gt(kb, 0), ld(C, c_idx(ii, j)), f32(0)));
    });
    Stmt fma = tile("f", [&](Expr ii, Expr j) {
      Expr kk = k_lo + k;
      Expr a = rows == 6 ? ld(Ap, (io * K + kk) * 6 + ii) : ld(A, (row0() + ii) * K + kk);
      return store(acc, ii * 64 + j, ld(acc, ii * 64 + j) + a * ld(Bp, (jo * K + kk) * 64 + j));
    });
    Stmt out =
        tile("o", [&](Expr ii, Expr j) { return store(C, c_idx(ii, j), ld(acc, ii * 64 + j)); });
    return loop::make_allocate(acc, loop::make_seq({init, serial(k, k_len, fma), out}));
  };
  Stmt main_rows = serial(io, full, micro(6, "6", [&] { return io * 6; }));
  Stmt rest_rows =
      loop(r, full * 6, M - full * 6, ForKind::kSerial, micro(1, "1", [&] { return Expr(r); }));
  Stmt compute = parallel(jo, panels, serial(kb, kblocks, loop::make_seq({main_rows, rest_rows})));
  return make_func(
      "gemm_packed", {A, B, C}, {M, N, K},
      loop::make_allocate(Bp, loop::make_allocate(Ap, loop::make_seq({pack, pack_a, compute}))));
}

double time_ms(const std::function<void()>& f, int reps) {
  f();  // warm-up
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

TEST(LlvmGemm, DISABLED_GemmBenchmark) {
  auto k = compile_cpu(packed_gemm_func());
  std::printf("compile: %.1f ms (ir %.1f, opt %.1f, codegen %.1f, link %.1f)\n", k->compile_ms(),
              k->compile_times().ir_gen_ms, k->compile_times().opt_ms,
              k->compile_times().codegen_ms, k->compile_times().link_ms);
  int saved_threads = runtime::get_num_threads();
  for (int64_t n : {1024, 2048}) {
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> dist(-1, 1);
    std::vector<float> a(n * n), b(n * n), c(n * n);
    for (float& x : a) x = dist(rng);
    for (float& x : b) x = dist(rng);
    for (int threads : {1, saved_threads}) {
      runtime::set_num_threads(threads);
      double ms = time_ms(
          [&] {
            call(*k, {a.data(), b.data(), c.data()}, {n, n, n});
          },
          n == 1024 ? 10 : 5);
      std::printf("gemm %lld^3, %d thread(s): %.2f ms, %.1f GFLOP/s\n", static_cast<long long>(n),
                  threads, ms, 2.0 * n * n * n / ms * 1e-6);
    }
    // Spot-check rows (incl. the leftover rows of the 1 x 64 tile) against a double reference.
    for (int64_t row : {int64_t{0}, n / 2 + 1, n - 1}) {
      for (int64_t col = 0; col < n; col += 37) {
        double want = 0;
        for (int64_t x = 0; x < n; ++x)
          want += static_cast<double>(a[row * n + x]) * b[x * n + col];
        ASSERT_NEAR(c[row * n + col], want, 1e-3 * std::sqrt(static_cast<double>(n)));
      }
    }
  }
  runtime::set_num_threads(saved_threads);
}

}  // namespace
}  // namespace tessera::codegen::llvm_test
