// Tests of the LLVM CPU code generator: loop IR built by hand, compiled, run, and compared with
// naive C++ references computed here.

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "codegen/llvm/compile.h"
#include "ir/buffer.h"
#include "ir/tensor.h"
#include "runtime/kernel.h"
#include "test_llvm_util.h"
#include "util/check.h"

namespace tessera::codegen::llvm_test {
namespace {

std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Lines of an assembly listing where a vector register is spilled or reloaded (LLVM annotates
// them "N-byte Spill" / "N-byte Reload").
std::string vector_spills(const std::string& asm_text) {
  std::string out, line;
  for (size_t pos = 0; pos < asm_text.size();) {
    size_t end = asm_text.find('\n', pos);
    if (end == std::string::npos) end = asm_text.size();
    line = asm_text.substr(pos, end - pos);
    pos = end + 1;
    bool spill =
        line.find("Spill") != std::string::npos || line.find("Reload") != std::string::npos;
    if (spill && line.find("mm") != std::string::npos) out += line + "\n";
  }
  return out;
}

void report_compile(const CompiledKernel& k) {
  const CompileTimes& t = k.compile_times();
  std::printf("[ compile  ] %-28s %6.1f ms (ir %.1f, opt %.1f, codegen %.1f, link %.1f)\n",
              k.func().name.c_str(), t.total_ms, t.ir_gen_ms, t.opt_ms, t.codegen_ms, t.link_ms);
}

// C[i] = A[i] + B[i]: a vectorized main loop over n/16 blocks plus a scalar tail loop.
TEST(LlvmCodegen, ElementwiseAddVectorizedWithTail) {
  Var n = ir::size_var("n");
  Buffer A = ir::make_buffer("A", DType::kFloat32, {n});
  Buffer B = ir::make_buffer("B", DType::kFloat32, {n});
  Buffer C = ir::make_buffer("C", DType::kFloat32, {n});
  Var io = loop_var("io"), ii = loop_var("ii"), t = loop_var("t");
  Expr blocks = ir::floordiv(n, 16);
  Expr i = io * 16 + ii;
  Stmt main = serial(io, blocks, vectorized(ii, 16, store(C, i, ld(A, i) + ld(B, i))));
  Stmt tail =
      loop(t, blocks * 16, n - blocks * 16, ForKind::kSerial, store(C, t, ld(A, t) + ld(B, t)));
  CompileOptions opts;
  opts.keep_asm = true;
  auto k = compile_cpu(make_func("add", {A, B, C}, {n}, loop::make_seq({main, tail})), opts);
  report_compile(*k);
  if (host_cpu().has_avx512) {
    EXPECT_NE(k->assembly().find("zmm"), std::string::npos) << "expected 512-bit vector code";
  }
  for (int64_t len : {0, 1, 15, 16, 17, 1000, 4099}) {
    auto a = random_floats(len, 1), b = random_floats(len, 2);
    std::vector<float> c(len + 1, -7.0f);  // one extra element must stay untouched
    call(*k, {a.data(), b.data(), c.data()}, {len});
    for (int64_t j = 0; j < len; ++j) ASSERT_EQ(c[j], a[j] + b[j]) << "len " << len << " j " << j;
    EXPECT_EQ(c[len], -7.0f);
  }
}

// One scalar stored by vectorized loops of two widths in one kernel: each loop needs the splat
// at its own width (a softmax after a GEMM register tile did this, and the 8-lane splat was
// reused in the 4-lane loop: invalid IR).
TEST(LlvmCodegen, OneScalarSplatAtTwoVectorWidths) {
  Buffer A = ir::make_buffer("A", DType::kFloat32, {ir::int_imm(8)});
  Buffer B = ir::make_buffer("B", DType::kFloat32, {ir::int_imm(4)});
  Var i = loop_var("i"), j = loop_var("j");
  Stmt body = loop::make_seq({vectorized(i, 8, store(A, i, f32(0.5))),
                              vectorized(j, 4, store(B, j, f32(0.5) + ld(B, j)))});
  auto k = compile_cpu(make_func("two_widths", {A, B}, {}, body));
  std::vector<float> a(8, 0.0f), b(4, 1.0f);
  call(*k, {a.data(), b.data()}, {});
  for (float x : a) EXPECT_EQ(x, 0.5f);
  for (float x : b) EXPECT_EQ(x, 1.5f);
}

// Loads with lane stride 2 and 3 (contiguous loads and shuffles), lane-invariant loads
// (broadcasts), non-linear indices (floormod) and a symbolic stride (a gather); a strided store
// (scatter).
TEST(LlvmCodegen, StridedGatherAndScatter) {
  Var n = ir::size_var("n");  // number of 16-lane blocks
  Var s = ir::size_var("s");  // symbolic stride
  Buffer A = ir::make_buffer("A", DType::kFloat32, {n * 64 + 8});
  Buffer B = ir::make_buffer("B", DType::kFloat32, {Expr(13)});
  Buffer S = ir::make_buffer("S", DType::kFloat32, {n * 16 * s + 1});
  Buffer out = ir::make_buffer("out", DType::kFloat32, {n * 16});
  Buffer outT = ir::make_buffer("outT", DType::kFloat32, {n * 16});
  Var io = loop_var("io"), ii = loop_var("ii");
  Expr i = io * 16 + ii;
  Expr value = ld(A, i * 2) + ld(A, 5) + ld(B, ir::floormod(i * 7, 13)) + ld(S, i * s) +
               ld(A, 3 * i + 1) * f32(0.5);
  // Transposed store: element (io, ii) of an n x 16 matrix goes to (ii, io) of a 16 x n one.
  Stmt body = loop::make_seq({store(out, i, value), store(outT, ii * n + io, ld(A, i))});
  auto k = compile_cpu(
      make_func("gather", {A, B, S, out, outT}, {n, s}, serial(io, n, vectorized(ii, 16, body))));
  report_compile(*k);
  for (int64_t nb : {1, 3}) {
    for (int64_t stride : {0, 1, 5}) {
      int64_t len = nb * 16;
      auto a = random_floats(nb * 64 + 8, 3), b = random_floats(13, 4),
           sv = random_floats(len * stride + 1, 5);
      std::vector<float> o(len), ot(len);
      call(*k, {a.data(), b.data(), sv.data(), o.data(), ot.data()}, {nb, stride});
      for (int64_t j = 0; j < len; ++j) {
        float want = a[j * 2] + a[5] + b[(j * 7) % 13] + sv[j * stride] + a[3 * j + 1] * 0.5f;
        ASSERT_NEAR(o[j], want, 1e-6f) << "j " << j << " stride " << stride;
        ASSERT_EQ(ot[(j % 16) * nb + j / 16], a[j]);
      }
    }
  }
}

// Unmasked loads with a small constant lane stride (pooling's stride-2 windows along a row) are
// contiguous vector loads and shuffles, not gathers; the last element a vector needs is its
// buffer's last, so the part of the last load past it must stay unread (masked).
TEST(LlvmCodegen, SmallStrideLoadsAreShuffledNotGathered) {
  for (int64_t stride : {2, 3, 4}) {
    const int64_t span = stride * 15 + 1;
    Buffer A = ir::make_buffer("A", DType::kFloat32, {Expr(span + 7)});
    Buffer out = ir::make_buffer("out", DType::kFloat32, {Expr(16)});
    Var v = loop_var("v");
    Stmt body = store(out, v, ld(A, v * stride + 7) - ld(A, v * stride + 6) * f32(0.5));
    CompileOptions opts;
    opts.keep_asm = true;
    auto k = compile_cpu(make_func("strided", {A, out}, {}, vectorized(v, 16, body)), opts);
    EXPECT_EQ(count_of(k->assembly(), "gather"), 0u) << "stride " << stride << "\n"
                                                     << k->assembly();
    auto a = random_floats(span + 7, 11);
    std::vector<float> o(16);
    call(*k, {a.data(), o.data()}, {});
    for (int64_t j = 0; j < 16; ++j) {
      ASSERT_NEAR(o[j], a[j * stride + 7] - a[j * stride + 6] * 0.5f, 1e-6f) << "stride " << stride;
    }
  }
}

// The same under a varying `if` (a row's tail): each contiguous load is masked to the elements
// of the active lanes, the last of which is the buffer's last element.
TEST(LlvmCodegen, MaskedSmallStrideLoadsAreShuffledNotGathered) {
  constexpr int64_t kActive = 11;
  for (int64_t stride : {2, 3, 4}) {
    Buffer A = ir::make_buffer("A", DType::kFloat32, {Expr(stride * (kActive - 1) + 8)});
    Buffer out = ir::make_buffer("out", DType::kFloat32, {Expr(16)});
    Var v = loop_var("v");
    Stmt body = loop::make_if(ir::lt(v, Expr(kActive)),
                              store(out, v, ld(A, v * stride + 7) + ld(A, v * stride + 5)));
    CompileOptions opts;
    opts.keep_asm = true;
    auto k = compile_cpu(make_func("masked_strided", {A, out}, {}, vectorized(v, 16, body)), opts);
    EXPECT_EQ(count_of(k->assembly(), "gather"), 0u) << "stride " << stride << "\n"
                                                     << k->assembly();
    auto a = random_floats(stride * (kActive - 1) + 8, 12);
    std::vector<float> o(16, -7.0f);
    call(*k, {a.data(), o.data()}, {});
    for (int64_t j = 0; j < 16; ++j) {
      const float want = j < kActive ? a[j * stride + 7] + a[j * stride + 5] : -7.0f;
      ASSERT_EQ(o[j], want) << "stride " << stride << " lane " << j;
    }
  }
}

// Shapes given by size variables; scalar inner loop with casts of loop variables.
TEST(LlvmCodegen, SymbolicSizes) {
  Var M = ir::size_var("M"), N = ir::size_var("N");
  Buffer A = ir::make_buffer("A", DType::kFloat32, {M, N});
  Buffer out = ir::make_buffer("out", DType::kFloat32, {M, N});
  Var i = loop_var("i"), j = loop_var("j");
  Expr idx = i * N + j;
  Expr value = ld(A, idx) * f32(2.0) + ir::cast(DType::kFloat32, i) -
               ir::cast(DType::kFloat32, j) * f32(0.25);
  auto k = compile_cpu(
      make_func("sym", {A, out}, {M, N}, serial(i, M, serial(j, N, store(out, idx, value)))));
  report_compile(*k);
  for (auto [m, nn] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {3, 7}, {17, 33}, {0, 5}}) {
    auto a = random_floats(m * nn, 6);
    std::vector<float> o(m * nn);
    call(*k, {a.data(), o.data()}, {m, nn});
    for (int64_t r = 0; r < m; ++r) {
      for (int64_t c = 0; c < nn; ++c) {
        float want = a[r * nn + c] * 2.0f + static_cast<float>(r) - static_cast<float>(c) * 0.25f;
        ASSERT_EQ(o[r * nn + c], want);
      }
    }
  }
}

// A parallel loop over rows writing disjoint slices. Live-ins: buffers, a size variable, a let
// variable bound outside, an outer serial loop variable and a heap buffer allocated outside.
TEST(LlvmCodegen, ParallelDisjointSlices) {
  Var M = ir::size_var("M"), N = ir::size_var("N");
  Buffer A = ir::make_buffer("A", DType::kFloat32, {M, N});
  Buffer out = ir::make_buffer("out", DType::kFloat32, {Expr(2), M, N});
  Buffer tmp = ir::make_buffer("tmp", DType::kFloat32, {M, N}, ir::MemScope::kHeap);
  Var rep = loop_var("rep"), i = loop_var("i"), j = loop_var("j"), i2 = loop_var("i2"),
      j2 = loop_var("j2");
  Var scale = ir::var("scale", ir::kNoLowerBound, ir::kNoUpperBound, DType::kFloat32);
  Stmt fill = parallel(i, M, serial(j, N, store(tmp, i * N + j, ld(A, i * N + j) * scale)));
  Expr o_idx = rep * (M * N) + i2 * N + j2;
  Stmt use = loop(
      i2, Expr(0), M, ForKind::kParallel,
      serial(j2, N,
             store(out, o_idx, ld(tmp, i2 * N + j2) + ir::cast(DType::kFloat32, i2 + rep * 1000))));
  Stmt body = serial(rep, 2,
                     loop::make_let(scale, ir::cast(DType::kFloat32, rep + 2),
                                    loop::make_allocate(tmp, loop::make_seq({fill, use}))));
  auto k = compile_cpu(make_func("par", {A, out}, {M, N}, body));
  report_compile(*k);
  for (auto [m, nn] : std::vector<std::pair<int64_t, int64_t>>{{37, 53}, {1, 3}, {2, 1}, {0, 4}}) {
    auto a = random_floats(m * nn, 7);
    std::vector<float> o(2 * m * nn, -1.0f);
    call(*k, {a.data(), o.data()}, {m, nn});
    for (int64_t r = 0; r < 2; ++r) {
      for (int64_t x = 0; x < m; ++x) {
        for (int64_t y = 0; y < nn; ++y) {
          float want = a[x * nn + y] * static_cast<float>(r + 2) + static_cast<float>(x + r * 1000);
          ASSERT_EQ(o[r * m * nn + x * nn + y], want) << r << " " << x << " " << y;
        }
      }
    }
  }
}

// A parallel loop with a non-zero start and a nested parallel loop (run serially inside).
TEST(LlvmCodegen, ParallelOffsetAndNested) {
  Var n = ir::size_var("n");
  Buffer out = ir::make_buffer("out", DType::kInt64, {n, Expr(8)});
  Var i = loop_var("i"), j = loop_var("j");
  Stmt inner = loop(j, Expr(0), Expr(8), ForKind::kParallel, store(out, i * 8 + j, i * 100 + j));
  auto k = compile_cpu(
      make_func("par2", {out}, {n}, loop(i, Expr(2), n - 2, ForKind::kParallel, inner)));
  int64_t len = 50;
  std::vector<int64_t> o(len * 8, -1);
  call(*k, {o.data()}, {len});
  for (int64_t x = 0; x < len; ++x) {
    for (int64_t y = 0; y < 8; ++y) ASSERT_EQ(o[x * 8 + y], x < 2 ? -1 : x * 100 + y);
  }
}

// Row sums with a 16-lane register accumulator, reduced at the end by an unrolled loop.
TEST(LlvmCodegen, ReductionWithRegisterAccumulator) {
  Var M = ir::size_var("M"), NB = ir::size_var("NB");
  Expr N = NB * 16;
  Buffer A = ir::make_buffer("A", DType::kFloat32, {M, N});
  Buffer out = ir::make_buffer("out", DType::kFloat32, {M});
  Buffer acc = ir::make_buffer("acc", DType::kFloat32, {Expr(16)}, ir::MemScope::kRegister);
  Buffer sum = ir::make_buffer("sum", DType::kFloat32, {Expr(1)}, ir::MemScope::kRegister);
  Var i = loop_var("i"), l = loop_var("l"), kb = loop_var("kb"), l2 = loop_var("l2"),
      l3 = loop_var("l3");
  Stmt init = vectorized(l, 16, store(acc, l, f32(0)));
  Stmt accumulate =
      serial(kb, NB, vectorized(l2, 16, store(acc, l2, ld(acc, l2) + ld(A, i * N + kb * 16 + l2))));
  Stmt finish = loop::make_allocate(
      sum, loop::make_seq({store(sum, 0, f32(0)),
                           unrolled(l3, 16, store(sum, 0, ld(sum, 0) + ld(acc, l3))),
                           store(out, i, ld(sum, 0))}));
  Stmt body = serial(i, M, loop::make_allocate(acc, loop::make_seq({init, accumulate, finish})));
  CompileOptions opts;
  opts.keep_asm = true;
  auto k = compile_cpu(make_func("rowsum", {A, out}, {M, NB}, body), opts);
  report_compile(*k);
  if (host_cpu().has_avx2) {
    ASSERT_NE(k->assembly().find("vaddps"), std::string::npos);
  }
  EXPECT_EQ(vector_spills(k->assembly()), "");
  int64_t m = 9, nb = 5, n = nb * 16;
  auto a = random_floats(m * n, 8);
  std::vector<float> o(m);
  call(*k, {a.data(), o.data()}, {m, nb});
  for (int64_t r = 0; r < m; ++r) {
    double want = 0;
    for (int64_t c = 0; c < n; ++c) want += a[r * n + c];
    ASSERT_NEAR(o[r], want, 1e-4) << "row " << r;
  }
}

// C[M,N] += A[M,K] * B[K,N] with a rows x (vectors x lanes) register tile: rows unrolled,
// columns as `vectors` groups of `lanes` vector lanes, k serial; the accumulators live in a
// kRegister buffer loaded from C before the k loop and stored after it. The tile that fits the
// host's register file: 6 x 64 (24 zmm accumulators of 32) with AVX-512, 4 x 16 (8 ymm of 16)
// with AVX2.
struct MicroTile {
  int64_t rows, vectors, lanes;
  int64_t cols() const { return vectors * lanes; }
};
MicroTile host_micro_tile() {
  return host_cpu().has_avx512 ? MicroTile{6, 4, 16} : MicroTile{4, 2, 8};
}

LoweredFunc gemm_microkernel_func(MicroTile t) {
  Var M = ir::size_var("M"), N = ir::size_var("N"), K = ir::size_var("K");
  Buffer A = ir::make_buffer("A", DType::kFloat32, {M, K});
  Buffer B = ir::make_buffer("B", DType::kFloat32, {K, N});
  Buffer C = ir::make_buffer("C", DType::kFloat32, {M, N});
  const int64_t cols = t.cols();
  Buffer acc =
      ir::make_buffer("acc", DType::kFloat32, {Expr(t.rows), Expr(cols)}, ir::MemScope::kRegister);
  Var io = loop_var("io"), jo = loop_var("jo"), k = loop_var("k");
  auto tile = [&](const std::string& tag, auto body_fn) {
    Var ii = loop_var("ii" + tag), jv = loop_var("jv" + tag), jl = loop_var("jl" + tag);
    return unrolled(
        ii, 6, unrolled(jv, t.vectors, vectorized(jl, t.lanes, body_fn(ii, jv * t.lanes + jl))));
  };
  auto c_idx = [&](const Expr& ii, const Expr& j) {
    return (io * t.rows + ii) * N + jo * cols + j;
  };
  Stmt load_c =
      tile("0", [&](Expr ii, Expr j) { return store(acc, ii * cols + j, ld(C, c_idx(ii, j))); });
  Stmt fma = tile("1", [&](Expr ii, Expr j) {
    return store(
        acc, ii * cols + j,
        ld(acc, ii * cols + j) + ld(A, (io * t.rows + ii) * K + k) * ld(B, k * N + jo * cols + j));
  });
  Stmt store_c =
      tile("2", [&](Expr ii, Expr j) { return store(C, c_idx(ii, j), ld(acc, ii * cols + j)); });
  Stmt body = serial(
      io, ir::floordiv(M, t.rows),
      serial(jo, ir::floordiv(N, cols),
             loop::make_allocate(acc, loop::make_seq({load_c, serial(k, K, fma), store_c}))));
  return make_func("gemm_register_tile", {A, B, C}, {M, N, K}, body);
}

TEST(LlvmCodegen, GemmMicroKernelRegisterTile) {
  CompileOptions opts;
  opts.keep_asm = true;
  opts.keep_ir = true;
  const MicroTile t = host_micro_tile();
  auto k = compile_cpu(gemm_microkernel_func(t), opts);
  report_compile(*k);
  EXPECT_TRUE(k->notes().empty()) << k->notes()[0];
  const std::string& asm_text = k->assembly();
  // Accumulators must stay in registers: no vector register is spilled or reloaded anywhere.
  // (The listing is annotated; make sure the annotation is there to be found.)
  ASSERT_NE(asm_text.find("# %bb"), std::string::npos) << "assembly listing without comments";
  EXPECT_EQ(vector_spills(asm_text), "");
  EXPECT_EQ(k->llvm_ir().find("alloca"), std::string::npos) << "register tile not promoted";
  EXPECT_GE(count_of(asm_text, "vfmadd"), static_cast<size_t>(t.rows * t.vectors))
      << "expected " << t.rows * t.vectors << " vector FMAs per k step";
  int64_t m = 12, n = 128, kk = 37;
  auto a = random_floats(m * kk, 9), b = random_floats(kk * n, 10), c = random_floats(m * n, 11);
  std::vector<double> want(m * n);
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t col = 0; col < n; ++col) {
      double s = c[r * n + col];
      for (int64_t x = 0; x < kk; ++x) s += static_cast<double>(a[r * kk + x]) * b[x * n + col];
      want[r * n + col] = s;
    }
  }
  call(*k, {a.data(), b.data(), c.data()}, {m, n, kk});
  for (int64_t x = 0; x < m * n; ++x) ASSERT_NEAR(c[x], want[x], 1e-4) << "element " << x;
}

int64_t ref_floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if (q * b != a && ((a < 0) != (b < 0))) --q;
  return q;
}
int64_t ref_floormod(int64_t a, int64_t b) { return a - ref_floordiv(a, b) * b; }

// Floor division/modulo with negative operands: constant divisors (power of two, other, negative)
// and per-element divisors, in vector and scalar code, for int64 and int32.
void check_floordiv(DType t, bool vector) {
  Buffer X = ir::make_buffer("X", t, {Expr(64)});
  Buffer D = ir::make_buffer("D", t, {Expr(64)});
  Buffer out = ir::make_buffer("out", t, {Expr(8), Expr(64)});
  Var io = loop_var("io"), ii = loop_var("ii");
  Expr i = io * 16 + ii;
  Expr x = ld(X, i), d = ld(D, i);
  auto c = [&](int64_t v) { return ir::int_imm(v, t); };
  std::vector<Expr> results = {
      ir::floordiv(x, c(4)),  ir::floormod(x, c(4)),  ir::floordiv(x, c(7)), ir::floormod(x, c(7)),
      ir::floordiv(x, c(-3)), ir::floormod(x, c(-3)), ir::floordiv(x, d),    ir::floormod(x, d)};
  std::vector<Stmt> stores;
  for (size_t r = 0; r < results.size(); ++r)
    stores.push_back(store(out, static_cast<int64_t>(r) * 64 + i, results[r]));
  Stmt inner =
      vector ? vectorized(ii, 16, loop::make_seq(stores)) : serial(ii, 16, loop::make_seq(stores));
  auto k = compile_cpu(make_func("floordiv", {X, D, out}, {}, serial(io, 4, inner)));
  std::vector<int64_t> xs(64), ds(64);
  for (int64_t j = 0; j < 64; ++j) {
    xs[j] = j * 7 % 61 - 30;  // -30 .. 30
    ds[j] = (j % 9) - 4;
    if (ds[j] == 0) ds[j] = 5;
  }
  auto check = [&](auto zero) {
    using T = decltype(zero);
    std::vector<T> xv(xs.begin(), xs.end()), dv(ds.begin(), ds.end()), o(8 * 64);
    call(*k, {xv.data(), dv.data(), o.data()}, {});
    for (int64_t j = 0; j < 64; ++j) {
      int64_t a = xs[j];
      std::vector<int64_t> want = {
          ref_floordiv(a, 4),  ref_floormod(a, 4),  ref_floordiv(a, 7),     ref_floormod(a, 7),
          ref_floordiv(a, -3), ref_floormod(a, -3), ref_floordiv(a, ds[j]), ref_floormod(a, ds[j])};
      for (int r = 0; r < 8; ++r) {
        ASSERT_EQ(static_cast<int64_t>(o[r * 64 + j]), want[r])
            << "result " << r << " x=" << a << " d=" << ds[j] << " vector=" << vector;
      }
    }
  };
  if (t == DType::kInt64) {
    check(int64_t{0});
  } else {
    check(int32_t{0});
  }
}

TEST(LlvmCodegen, FloorDivModNegativeOperands) {
  for (DType t : {DType::kInt64, DType::kInt32}) {
    check_floordiv(t, true);
    check_floordiv(t, false);
  }
}

// max/min propagate NaN from either side (torch.maximum semantics), vector and scalar paths.
TEST(LlvmCodegen, MaxMinPropagateNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> a = {1, nan, 3, nan, -inf, 0, 2, -1, 5, nan, 7, 8, 1, 2, 3, 4};
  std::vector<float> b = {2, 1, nan, nan, 1, -0.0f, inf, -2, nan, 6, 7, -8, 4, 3, 2, 1};
  for (bool vec : {true, false}) {
    Buffer A = ir::make_buffer("A", DType::kFloat32, {Expr(16)});
    Buffer B = ir::make_buffer("B", DType::kFloat32, {Expr(16)});
    Buffer out = ir::make_buffer("out", DType::kFloat32, {Expr(32)});
    Var i = loop_var("i");
    Stmt body = loop::make_seq({store(out, i, ir::max(ld(A, i), ld(B, i))),
                                store(out, i + 16, ir::min(ld(A, i), ld(B, i)))});
    auto k = compile_cpu(
        make_func("maxnan", {A, B, out}, {}, vec ? vectorized(i, 16, body) : serial(i, 16, body)));
    std::vector<float> o(32);
    call(*k, {a.data(), b.data(), o.data()}, {});
    for (int j = 0; j < 16; ++j) {
      if (std::isnan(a[j]) || std::isnan(b[j])) {
        EXPECT_TRUE(std::isnan(o[j])) << "max lane " << j << " vec " << vec;
        EXPECT_TRUE(std::isnan(o[j + 16])) << "min lane " << j << " vec " << vec;
      } else {
        EXPECT_EQ(o[j], std::max(a[j], b[j])) << j;
        EXPECT_EQ(o[j + 16], std::min(a[j], b[j])) << j;
      }
    }
  }
}

// Every task allocates its own heap temporary inside a parallel loop.
TEST(LlvmCodegen, HeapAllocationInsideParallelLoop) {
  Var M = ir::size_var("M"), N = ir::size_var("N");
  Buffer A = ir::make_buffer("A", DType::kFloat32, {M, N});
  Buffer out = ir::make_buffer("out", DType::kFloat32, {M, N});
  Buffer tmp = ir::make_buffer("row", DType::kFloat32, {N}, ir::MemScope::kHeap);
  Var i = loop_var("i"), j = loop_var("j"), j2 = loop_var("j2");
  Stmt body = parallel(
      i, M,
      loop::make_allocate(
          tmp, loop::make_seq({serial(j, N, store(tmp, j, ld(A, i * N + j) * f32(2))),
                               serial(j2, N, store(out, i * N + j2, ld(tmp, N - 1 - j2)))})));
  auto k = compile_cpu(make_func("heap_par", {A, out}, {M, N}, body));
  int64_t m = 64, n = 1000;
  auto a = random_floats(m * n, 12);
  std::vector<float> o(m * n);
  call(*k, {a.data(), o.data()}, {m, n});
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t c = 0; c < n; ++c) ASSERT_EQ(o[r * n + c], a[r * n + (n - 1 - c)] * 2.0f);
  }
}

// A kStack buffer too large for a thread's stack is placed on the heap instead (with a note).
TEST(LlvmCodegen, OversizedStackBufferGoesToHeap) {
  const int64_t n = 1 << 20;  // 4 MiB of floats
  Buffer out = ir::make_buffer("out", DType::kFloat32, {Expr(4)});
  Buffer big = ir::make_buffer("big", DType::kFloat32, {Expr(n)}, ir::MemScope::kStack);
  Var i = loop_var("i"), j = loop_var("j");
  Stmt body = loop::make_allocate(
      big, loop::make_seq({serial(i, n, store(big, i, ir::cast(DType::kFloat32, i))),
                           serial(j, 4, store(out, j, ld(big, n - 1 - j)))}));
  auto k = compile_cpu(make_func("bigstack", {out}, {}, body));
  ASSERT_EQ(k->notes().size(), 1u);
  EXPECT_NE(k->notes()[0].find("heap"), std::string::npos) << k->notes()[0];
  std::vector<float> o(4);
  call(*k, {o.data()}, {});
  for (int x = 0; x < 4; ++x) EXPECT_EQ(o[x], static_cast<float>(n - 1 - x));
}

// One kernel using every expression kind except kAccess, in vector and scalar form.
TEST(LlvmCodegen, EveryExpressionKind) {
  for (bool vec : {true, false}) {
    Buffer X = ir::make_buffer("X", DType::kFloat32, {Expr(32)});
    Buffer Y = ir::make_buffer("Y", DType::kFloat32, {Expr(32)});
    Buffer K = ir::make_buffer("K", DType::kInt32, {Expr(32)});
    Buffer out = ir::make_buffer("out", DType::kFloat32, {Expr(32)});
    Buffer flags = ir::make_buffer("flags", DType::kBool, {Expr(32)});
    Var io = loop_var("io"), ii = loop_var("ii");
    Expr i = io * 16 + ii;
    Expr x = ld(X, i), y = ld(Y, i), kv = ld(K, i);
    Expr a = (x + y) * f32(2.0) - ir::div(x, ir::call(ir::CallOp::kAbs, {y}) + f32(1.0));
    Expr k64 = ir::cast(DType::kInt64, kv);
    Expr b = ir::cast(DType::kFloat32, ir::floordiv(k64, 3) + ir::floormod(k64, 5));
    Expr c = ir::min(x, y) + ir::max(x, y);
    Expr three = ir::int_imm(3, DType::kInt32), seven = ir::int_imm(7, DType::kInt32);
    Expr cond =
        ir::logical_or(ir::logical_or(ir::logical_and(ir::lt(x, y), ir::logical_not(ir::eq(x, y))),
                                      ir::logical_and(ir::ge(x, f32(0.5)), ir::le(y, f32(0.25)))),
                       ir::logical_and(ir::ne(kv, three), ir::gt(kv, seven)));
    Expr ax = ir::call(ir::CallOp::kAbs, {x}), ay = ir::call(ir::CallOp::kAbs, {y});
    Expr t1 = ir::exp(x) + ir::log(ay + f32(1)) + ir::sqrt(ax) +
              ir::call(ir::CallOp::kRsqrt, {ay + f32(1)});
    Expr t2 =
        ir::tanh(x) + ir::erf(y) + ir::sigmoid(x) + ir::call(ir::CallOp::kFloor, {x * f32(3)}) +
        ir::call(ir::CallOp::kCeil, {y * f32(3)}) + ir::call(ir::CallOp::kPow, {ax + f32(1), y});
    Expr d = ir::select(cond, t1, t2);
    Expr value = a + b + c + d + ir::cast(DType::kFloat32, i) +
                 ir::cast(DType::kFloat32, ir::bool_imm(true));
    Stmt body = loop::make_seq({store(out, i, value), store(flags, i, cond)});
    Stmt inner = vec ? vectorized(ii, 16, body) : serial(ii, 16, body);
    auto k = compile_cpu(make_func("all_kinds", {X, Y, K, out, flags}, {}, serial(io, 2, inner)));
    report_compile(*k);
    auto xs = random_floats(32, 13, -2, 2), ys = random_floats(32, 14, -2, 2);
    std::vector<int32_t> ks(32);
    for (int j = 0; j < 32; ++j) ks[j] = j % 11 - 3;
    std::vector<float> o(32);
    std::vector<uint8_t> fl(32, 7);
    call(*k, {xs.data(), ys.data(), ks.data(), o.data(), fl.data()}, {});
    for (int j = 0; j < 32; ++j) {
      double xd = xs[j], yd = ys[j];
      int64_t kd = ks[j];
      double av = (xd + yd) * 2 - xd / (std::fabs(yd) + 1);
      double bv = static_cast<double>(ref_floordiv(kd, 3) + ref_floormod(kd, 5));
      double cv = std::min(xd, yd) + std::max(xd, yd);
      bool cd = (xd < yd && !(xd == yd)) || (xd >= 0.5 && yd <= 0.25) || (kd != 3 && kd > 7);
      double dv = cd ? std::exp(xd) + std::log(std::fabs(yd) + 1) + std::sqrt(std::fabs(xd)) +
                           1 / std::sqrt(std::fabs(yd) + 1)
                     : std::tanh(xd) + std::erf(yd) + 1 / (1 + std::exp(-xd)) +
                           std::floor(static_cast<float>(xd * 3)) +
                           std::ceil(static_cast<float>(yd * 3)) + std::pow(std::fabs(xd) + 1, yd);
      double want = av + bv + cv + dv + j + 1;
      EXPECT_NEAR(o[j], want, 1e-4 * (1 + std::fabs(want))) << "element " << j << " vec " << vec;
      EXPECT_EQ(fl[j], cd ? 1 : 0) << "element " << j;
    }
  }
}

TEST(LlvmCodegen, TensorAccessInLoopIRIsAnError) {
  ir::Tensor T = ir::placeholder("T", {Expr(4)});
  Buffer out = ir::make_buffer("out", DType::kFloat32, {Expr(4)});
  Var i = loop_var("i");
  auto f = make_func("bad", {out}, {}, serial(i, 4, store(out, i, ir::access(T, {i}))));
  try {
    compile_cpu(f);
    FAIL() << "expected tessera::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("access"), std::string::npos) << e.what();
  }
}

TEST(LlvmCodegen, GpuLoopKindIsAnError) {
  Buffer out = ir::make_buffer("out", DType::kFloat32, {Expr(4)});
  Var i = loop_var("i");
  auto f = make_func("gpu", {out}, {},
                     loop(i, Expr(0), Expr(4), ForKind::kGpuThreadX, store(out, i, f32(1))));
  EXPECT_THROW(compile_cpu(f), Error);
}

TEST(LlvmCodegen, UnboundVariableIsAnError) {
  Buffer out = ir::make_buffer("out", DType::kFloat32, {Expr(4)});
  Var i = loop_var("i"), stray = loop_var("stray");
  auto f = make_func("unbound", {out}, {}, serial(i, 4, store(out, i + stray, f32(1))));
  EXPECT_THROW(compile_cpu(f), Error);
}

// A vectorized loop whose iterations depend on each other (a running sum into one element)
// must not be executed lane-wise: the result has to match sequential execution.
TEST(LlvmCodegen, LoopCarriedDependenceFallsBackToScalar) {
  Buffer A = ir::make_buffer("A", DType::kFloat32, {Expr(16)});
  Buffer out = ir::make_buffer("out", DType::kFloat32, {Expr(17)});
  Var i = loop_var("i");
  // out[0] accumulates; out[i+1] = out[i] + A[i] is a prefix sum (reads the previous lane's write).
  Stmt body = loop::make_seq(
      {store(out, 0, ld(out, 0) + ld(A, i)), store(out, i + 1, ld(out, i) + ld(A, i))});
  auto k = compile_cpu(make_func("carried", {A, out}, {}, vectorized(i, 16, body)));
  ASSERT_EQ(k->notes().size(), 1u);
  EXPECT_NE(k->notes()[0].find("scalar"), std::string::npos) << k->notes()[0];
  auto a = random_floats(16, 15);
  std::vector<float> o(17, 0.0f), want(17, 0.0f);
  for (int j = 0; j < 16; ++j) {
    want[0] = want[0] + a[j];
    want[j + 1] = want[j] + a[j];
  }
  call(*k, {a.data(), o.data()}, {});
  for (int j = 0; j < 17; ++j) EXPECT_EQ(o[j], want[j]) << j;
}

// Unrolled loops inside a vectorized body: register-tile rows (disjoint lane ranges) stay in SIMD
// form; overlapping copies (rows 8 apart with 16 lanes) must keep iteration order.
TEST(LlvmCodegen, UnrolledLoopsInsideVectorizedBody) {
  Var n = ir::size_var("n");
  Buffer A = ir::make_buffer("A", DType::kFloat32, {Expr(6), n});
  Buffer out = ir::make_buffer("out", DType::kFloat32, {Expr(6), Expr(16)});
  Buffer acc =
      ir::make_buffer("acc", DType::kFloat32, {Expr(6), Expr(16)}, ir::MemScope::kRegister);
  Var jl = loop_var("jl"), ii = loop_var("ii"), k = loop_var("k"), jl2 = loop_var("jl2"),
      ii2 = loop_var("ii2"), jl3 = loop_var("jl3"), ii3 = loop_var("ii3");
  Stmt init = vectorized(jl, 16, unrolled(ii, 6, store(acc, ii * 16 + jl, f32(0))));
  Stmt sum =
      serial(k, ir::floordiv(n, 16),
             vectorized(jl2, 16,
                        unrolled(ii2, 6,
                                 store(acc, ii2 * 16 + jl2,
                                       ld(acc, ii2 * 16 + jl2) + ld(A, ii2 * n + k * 16 + jl2)))));
  Stmt fin =
      vectorized(jl3, 16, unrolled(ii3, 6, store(out, ii3 * 16 + jl3, ld(acc, ii3 * 16 + jl3))));
  CompileOptions opts;
  opts.keep_ir = true;
  auto kern = compile_cpu(make_func("inner_unroll", {A, out}, {n},
                                    loop::make_allocate(acc, loop::make_seq({init, sum, fin}))),
                          opts);
  EXPECT_NE(kern->llvm_ir().find("fadd contract <16 x float>"), std::string::npos)
      << "the accumulation was not vectorized";
  EXPECT_TRUE(kern->notes().empty());
  int64_t len = 64;
  auto a = random_floats(6 * len, 18);
  std::vector<float> o(96);
  call(*kern, {a.data(), o.data()}, {len});
  for (int r = 0; r < 6; ++r) {
    for (int l = 0; l < 16; ++l) {
      float want = 0;
      for (int b = 0; b < len / 16; ++b) want += a[r * len + b * 16 + l];
      ASSERT_EQ(o[r * 16 + l], want) << r << " " << l;
    }
  }

  // out2[ii*8 + jl] = 2 * out2[ii*8 + jl] + ii: copies ii = 0 and 1 overlap on elements 8..15,
  // and the two updates do not commute, so lane-wise execution would give a different answer.
  Buffer out2 = ir::make_buffer("out2", DType::kFloat32, {Expr(24)});
  Var j = loop_var("j"), c = loop_var("c");
  Stmt body = vectorized(
      j, 16,
      unrolled(
          c, 2,
          store(out2, c * 8 + j, ld(out2, c * 8 + j) * f32(2) + ir::cast(DType::kFloat32, c))));
  auto k2 = compile_cpu(make_func("overlap", {out2}, {}, body));
  EXPECT_EQ(k2->notes().size(), 1u);
  std::vector<float> o2(24, 1.0f), want(24, 1.0f);
  for (int x = 0; x < 16; ++x) {
    for (int y = 0; y < 2; ++y) want[y * 8 + x] = want[y * 8 + x] * 2 + static_cast<float>(y);
  }
  call(*k2, {o2.data()}, {});
  for (int x = 0; x < 24; ++x) EXPECT_EQ(o2[x], want[x]) << x;
}

// Memory whose last valid element sits right before an inaccessible page: reading past it
// faults, so a test passes only if out-of-bounds lanes are never loaded.
class GuardedFloats {
 public:
  explicit GuardedFloats(size_t n) : n_(n) {
    page_ = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    size_t bytes = (n * sizeof(float) + page_ - 1) / page_ * page_;
    map_bytes_ = bytes + page_;
    base_ = static_cast<char*>(
        mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    mprotect(base_ + bytes, page_, PROT_NONE);
    data_ = reinterpret_cast<float*>(base_ + bytes - n * sizeof(float));
  }
  ~GuardedFloats() { munmap(base_, map_bytes_); }
  float* data() { return data_; }

 private:
  size_t n_, page_, map_bytes_;
  char* base_;
  float* data_;
};

// Padding reads: out[i] = (i < n) ? A[i] : -1 over a vector of 16 lanes past the end of A, and a
// varying `if` guarding a store. The select must not load the out-of-bounds lanes.
TEST(LlvmCodegen, GuardedLoadsAndMaskedStores) {
  Var n = ir::size_var("n");
  Buffer A = ir::make_buffer("A", DType::kFloat32, {n});
  Buffer out = ir::make_buffer("out", DType::kFloat32, {Expr(64)});
  Buffer out2 = ir::make_buffer("out2", DType::kFloat32, {Expr(64)});
  Var io = loop_var("io"), ii = loop_var("ii");
  Expr i = io * 16 + ii;
  Stmt body = loop::make_seq({
      store(out, i, ir::select(ir::lt(i, n), ld(A, i), f32(-1))),
      loop::make_if(ir::lt(i, n), store(out2, i, ld(A, i) * f32(2)), store(out2, i, f32(5))),
  });
  auto k = compile_cpu(
      make_func("guarded", {A, out, out2}, {n}, serial(io, 4, vectorized(ii, 16, body))));
  for (int64_t len : {0, 5, 16, 37, 64}) {
    GuardedFloats a(len);
    auto src = random_floats(len, 16);
    std::copy(src.begin(), src.end(), a.data());
    std::vector<float> o(64), o2(64);
    call(*k, {a.data(), o.data(), o2.data()}, {len});
    for (int64_t j = 0; j < 64; ++j) {
      ASSERT_EQ(o[j], j < len ? src[j] : -1.0f) << "len " << len << " j " << j;
      ASSERT_EQ(o2[j], j < len ? src[j] * 2 : 5.0f) << "len " << len << " j " << j;
    }
  }
}

// A row index chosen by a select whose arms load (a gathered embedding row, T5's position
// buckets) is lane-invariant inside a vectorized body when its condition and arms are: the select
// branches on the condition and the row's address stays one scalar. (A splat lane mask made the
// index a vector, and the row load, which needs a scalar address, could not be emitted.)
TEST(LlvmCodegen, GuardedRowIndexInsideVectorizedBody) {
  constexpr int64_t kRows = 8, kLanes = 16, kOut = 4;
  Buffer W = ir::make_buffer("W", DType::kFloat32, {Expr(kRows * kLanes)});
  Buffer I = ir::make_buffer("I", DType::kInt64, {Expr(kOut)});
  Buffer J = ir::make_buffer("J", DType::kInt64, {Expr(kOut)});
  Buffer out = ir::make_buffer("out", DType::kFloat32, {Expr(kOut * kLanes)});
  Var r = loop_var("r"), ii = loop_var("ii");
  Expr row = ir::select(ir::lt(ld(I, r), Expr(kRows)), ld(I, r), ld(J, r));
  Stmt body = store(out, r * kLanes + ii, ld(W, row * kLanes + ii));
  auto k = compile_cpu(
      make_func("rows", {W, I, J, out}, {}, serial(r, kOut, vectorized(ii, kLanes, body))));
  auto w = random_floats(kRows * kLanes, 21);
  std::vector<int64_t> i = {3, 9, 0, 12}, j = {5, 2, 7, 6};
  std::vector<float> o(kOut * kLanes);
  call(*k, {w.data(), i.data(), j.data(), o.data()}, {});
  for (int64_t rr = 0; rr < kOut; ++rr) {
    int64_t want_row = i[rr] < kRows ? i[rr] : j[rr];
    for (int64_t l = 0; l < kLanes; ++l) {
      ASSERT_EQ(o[rr * kLanes + l], w[want_row * kLanes + l]) << "row " << rr << " lane " << l;
    }
  }
}

uint16_t to_bf16_rne(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (std::isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fff + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}
float from_bf16(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
// IEEE half -> float, written out for the test (independent of the code generator).
float from_f16(uint16_t h) {
  int sign = h >> 15, exp = (h >> 10) & 31, man = h & 1023;
  double v;
  if (exp == 0) {
    v = std::ldexp(man, -24);
  } else if (exp == 31) {
    v = man ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else {
    v = std::ldexp(man + 1024, exp - 25);
  }
  return static_cast<float>(sign ? -v : v);
}

// fp16 and bf16 buffers: loads widen to f32, stores round to nearest even.
TEST(LlvmCodegen, HalfAndBFloat16Buffers) {
  for (bool vec : {true, false}) {
    Buffer H = ir::make_buffer("H", DType::kFloat16, {Expr(32)});
    Buffer Bf = ir::make_buffer("Bf", DType::kBFloat16, {Expr(32)});
    Buffer outH = ir::make_buffer("outH", DType::kFloat16, {Expr(32)});
    Buffer outB = ir::make_buffer("outB", DType::kBFloat16, {Expr(32)});
    Buffer outF = ir::make_buffer("outF", DType::kFloat32, {Expr(32)});
    Var io = loop_var("io"), ii = loop_var("ii");
    Expr i = io * 16 + ii;
    Expr h = ld(H, i), bf = ld(Bf, i);
    Expr sum = ir::cast(DType::kFloat32, h) + ir::cast(DType::kFloat32, bf);
    Stmt body = loop::make_seq({store(outF, i, sum), store(outB, i, sum * f32(1.0 / 3)),
                                store(outH, i, sum * f32(1.0 / 3))});
    Stmt inner = vec ? vectorized(ii, 16, body) : serial(ii, 16, body);
    auto k = compile_cpu(make_func("half", {H, Bf, outH, outB, outF}, {}, serial(io, 2, inner)));
    std::vector<uint16_t> hs(32), bs(32), oh(32), ob(32);
    std::vector<float> of(32);
    for (int j = 0; j < 32; ++j) {
      hs[j] = static_cast<uint16_t>(0x3c00 + j * 37 - 400);  // around 1.0, some below
      bs[j] = to_bf16_rne(static_cast<float>(j) * 0.37f - 3.0f);
    }
    call(*k, {hs.data(), bs.data(), oh.data(), ob.data(), of.data()}, {});
    for (int j = 0; j < 32; ++j) {
      float s = from_f16(hs[j]) + from_bf16(bs[j]);
      ASSERT_EQ(of[j], s) << j;
      float third = s * static_cast<float>(1.0 / 3);
      ASSERT_EQ(ob[j], to_bf16_rne(third)) << j;
      // The f16 result must be the f16 value nearest to `third`.
      float got = from_f16(oh[j]);
      float err = std::fabs(got - third);
      for (int d : {-1, 1}) {
        float neighbour = from_f16(static_cast<uint16_t>(oh[j] + d));
        ASSERT_LE(err, std::fabs(neighbour - third)) << j;
      }
    }
  }
}

// Let variables inside a vectorized body (varying and uniform), with a unit-stride access whose
// index goes through the let.
TEST(LlvmCodegen, LetInsideVectorizedBody) {
  Buffer A = ir::make_buffer("A", DType::kFloat32, {Expr(48)});
  Buffer out = ir::make_buffer("out", DType::kFloat32, {Expr(48)});
  Var io = loop_var("io"), ii = loop_var("ii");
  Var idx = loop_var("idx");
  Var base = loop_var("base");
  Var sq = ir::var("sq", ir::kNoLowerBound, ir::kNoUpperBound, DType::kFloat32);
  Stmt body = loop::make_let(
      base, io * 16,
      loop::make_let(idx, base + ii,
                     loop::make_let(sq, ld(A, idx) * ld(A, idx),
                                    store(out, idx, sq + ir::cast(DType::kFloat32, base)))));
  auto k = compile_cpu(make_func("lets", {A, out}, {}, serial(io, 3, vectorized(ii, 16, body))));
  auto a = random_floats(48, 17);
  std::vector<float> o(48);
  call(*k, {a.data(), o.data()}, {});
  for (int j = 0; j < 48; ++j) ASSERT_EQ(o[j], a[j] * a[j] + static_cast<float>(j / 16 * 16)) << j;
}

TEST(RuntimeKernel, ChecksArgumentsAndComputesShapes) {
  Var M = ir::size_var("M", 1, 1000), N = ir::size_var("N");
  Buffer A = ir::make_buffer("A", DType::kFloat32, {M, N});
  Buffer out = ir::make_buffer("out", DType::kFloat32, {M, N + 1});
  Var i = loop_var("i"), j = loop_var("j");
  Stmt body = serial(i, M, serial(j, N, store(out, i * (N + 1) + j, ld(A, i * N + j))));
  runtime::Kernel k = runtime::Kernel::compile(make_func("copy", {A, out}, {M, N}, body));
  EXPECT_EQ(k.args().size(), 2u);
  EXPECT_EQ(k.args()[1].name, "out");
  auto shapes = k.arg_shapes({3, 4});
  EXPECT_EQ(shapes[0], (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(shapes[1], (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(k.arg_numels({3, 4}), (std::vector<int64_t>{12, 15}));
  std::vector<float> a(12, 1.0f), o(15, 0.0f);
  EXPECT_THROW(k.run({a.data()}, {3, 4}), Error);            // too few buffers
  EXPECT_THROW(k.run({a.data(), o.data()}, {3}), Error);     // too few sizes
  EXPECT_THROW(k.run({a.data(), nullptr}, {3, 4}), Error);   // null buffer
  EXPECT_THROW(k.run({a.data(), o.data()}, {0, 4}), Error);  // M below its range
  k.run({a.data(), o.data()}, {3, 4});
  for (int r = 0; r < 3; ++r) {
    for (int c = 0; c < 5; ++c) EXPECT_EQ(o[r * 5 + c], c < 4 ? 1.0f : 0.0f);
  }
  // With N = 0, A is empty (null is fine) but out still has M elements (null is not).
  EXPECT_THROW(k.run({nullptr, nullptr}, {1, 0}), Error);
  o[0] = 3.0f;
  k.run({nullptr, o.data()}, {1, 0});
  EXPECT_EQ(o[0], 3.0f);
}

}  // namespace
}  // namespace tessera::codegen::llvm_test
