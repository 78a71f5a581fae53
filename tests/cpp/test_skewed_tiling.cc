// Skewed register tiles (schedule/skewed_tiling.h): band products O[.., s, .., v] reading
// L[.., s + v + c] computed over the window n = (s - s0) + v, each L vector shared by the
// register tile's rows. Checked: which stages the rules give the skew to, and the values of the
// compiled kernels (JIT and interpreter) on shapes whose tiles are cut along every axis, with
// epilogues, a reshape epilogue, several tile shapes, and annotations the skew does not fit.
#include "const_dims.h"
#include "e2e_harness.h"
#include "loop/printer.h"
#include "schedule/default_schedule.h"
#include "schedule/skewed_tiling.h"
#include "schedule/stage_plan.h"
#include "synthetic_hw.h"

namespace tessera::testing {
namespace {

using ir::Expr;
using ir::Tensor;
using ir::Var;

// O[b, q, w] = sum_k A[b, q, k] * L[b, k, q + w + shift]: a dilation-1 band of `band` lanes.
struct Band {
  Tensor a, l, o;
};
Band band_product(int64_t rows, int64_t band, int64_t k, int64_t shift = 0,
                  ir::DType dtype = ir::DType::kFloat32) {
  Band b;
  b.a = ir::placeholder("A", dims({2, rows, k}), dtype);
  b.l = ir::placeholder("L", dims({2, k, rows + band - 1 + shift}), dtype);
  b.o = ir::reduce("O", dims({2, rows, band}), dims({k}), ir::ReduceKind::kSum,
                   [&](const std::vector<Var>& x, const std::vector<Var>& r) {
                     return ir::access(b.a, {x[0], x[1], r[0]}) *
                            ir::access(b.l, {x[0], r[0], x[1] + x[2] + ir::int_imm(shift)});
                   });
  return b;
}

schedule::KernelSchedule rules_for(const std::vector<Tensor>& outs,
                                   const std::vector<Tensor>& ins) {
  return schedule::default_schedule(schedule::plan_stages(outs, ins), synthetic_target());
}

// The rules' schedule with the last stage's register tile set by hand.
schedule::KernelSchedule with_tile(schedule::KernelSchedule s, std::vector<int64_t> reg,
                                   std::vector<int64_t> outer) {
  s.stages.back().tile_reg = std::move(reg);
  s.stages.back().tile_outer = std::move(outer);
  return s;
}

TEST(SkewedTiling, TheRulesSkewABandProductAlongItsRows) {
  const Band b = band_product(37, 21, 19);
  const schedule::KernelSchedule s = rules_for({b.o}, {b.a, b.l});
  ASSERT_EQ(s.stages.size(), 1u);
  const schedule::StageAnnotation& ann = s.stages[0];
  EXPECT_EQ(ann.skew_axis, 1) << s.dump();
  EXPECT_EQ(ann.vector_axis, 2);
  EXPECT_EQ(ann.tile_reg[1], 8);
  EXPECT_EQ(ann.tile_reg[2], 16);  // the window of 8 - 1 + 21 lanes holds one vector
  // The JSON keeps the skew.
  EXPECT_EQ(schedule::KernelSchedule::parse(s.dump()).stages[0].skew_axis, 1);
  // Whole reduction in one go, no packing: the skewed nest's preconditions.
  EXPECT_TRUE(ann.pack.empty());
  EXPECT_EQ(ann.tile_reduce, (std::vector<int64_t>{19}));
  // A window of 8 - 1 + 65 lanes takes two vectors per column.
  const Band wide = band_product(37, 65, 19);
  EXPECT_EQ(rules_for({wide.o}, {wide.a, wide.l}).stages[0].tile_reg[2], 32);
}

TEST(SkewedTiling, BandProductsMatchTheReferenceWhateverTheTile) {
  // 37 rows (cut by every row tile below), bands of 21 and 65 lanes (windows cut by the vector
  // columns), 19 reduce steps (not a multiple of the unroll), reads shifted by 3.
  for (const int64_t band : {21, 65}) {
    const Band b = band_product(37, band, 19, 3);
    const schedule::KernelSchedule rules = rules_for({b.o}, {b.a, b.l});
    ASSERT_EQ(rules.stages[0].skew_axis, 1) << rules.dump();
    check_graph({{b.o}, {b.a, b.l}}, rules, /*use_jit=*/true);
    check_graph({{b.o}, {b.a, b.l}}, rules, /*use_jit=*/false);
    const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> tiles = {
        {{1, 8, 16}, {1, 64, 16}},
        {{1, 3, 48}, {1, 6, 48}},
        {{2, 5, 16}, {2, 5, 16}},
        {{1, 1, 16}, {1, 4, 16}},
        {{1, 16, 16}, {1, 16, 16}}};
    for (const auto& [reg, outer] : tiles) {
      SCOPED_TRACE(::testing::Message() << "band " << band << ", tile " << reg[1] << "x" << reg[2]);
      check_graph({{b.o}, {b.a, b.l}}, with_tile(rules, reg, outer), /*use_jit=*/true);
    }
  }
}

TEST(SkewedTiling, KeepsF64AndMaxReductionsExact) {
  const Band f64 = band_product(20, 17, 8, 0, ir::DType::kFloat64);
  schedule::KernelSchedule s = rules_for({f64.o}, {f64.a, f64.l});
  ASSERT_EQ(s.stages[0].skew_axis, 1) << s.dump();
  check_graph({{f64.o}, {f64.a, f64.l}}, s, /*use_jit=*/true);
  // A max-plus band: the accumulators start from max's identity, not 0.
  Tensor a = ir::placeholder("A", dims({30, 9}));
  Tensor l = ir::placeholder("L", dims({9, 30 + 40 - 1}));
  Tensor o = ir::reduce("O", dims({30, 40}), dims({9}), ir::ReduceKind::kMax,
                        [&](const std::vector<Var>& x, const std::vector<Var>& r) {
                          return ir::access(a, {x[0], r[0]}) + ir::access(l, {r[0], x[0] + x[1]});
                        });
  s = rules_for({o}, {a, l});
  ASSERT_EQ(s.stages[0].skew_axis, 0) << s.dump();
  check_graph({{o}, {a, l}}, s, /*use_jit=*/true);
}

TEST(SkewedTiling, EpiloguesRunOnTheBandsLanesOnly) {
  // relu(O + bias[w]): the epilogue reads along v, which the window's extra lanes would take
  // past the end of bias.
  const Band b = band_product(29, 33, 16);
  Tensor bias = ir::placeholder("bias", dims({33}));
  Tensor out = ir::compute("R", dims({2, 29, 33}), [&](const std::vector<Var>& x) {
    return ir::max(ir::access(b.o, {x[0], x[1], x[2]}) + ir::access(bias, {x[2]}),
                   ir::float_imm(0.0));
  });
  const schedule::KernelSchedule s = rules_for({out}, {b.a, b.l, bias});
  ASSERT_EQ(s.stages.size(), 1u) << s.dump();
  ASSERT_EQ(s.stages[0].skew_axis, 1) << s.dump();
  check_graph({{out}, {b.a, b.l, bias}}, s, /*use_jit=*/true);
  check_graph({{out}, {b.a, b.l, bias}}, s, /*use_jit=*/false);
}

TEST(SkewedTiling, ARegroupedBandWritesTheOutputThroughItsReshape) {
  // EinNet's dilation-2 G2BMM with its rows regrouped: S[q, p, w] = sum_k A[2q + p, k] *
  // L[k, p, q + w], written as O[m, w] = S[m // 2, m % 2, w] by the stage's reshape epilogue.
  Tensor a = ir::placeholder("A", dims({46, 12}));
  Tensor l = ir::placeholder("L", dims({12, 2, 23 + 25 - 1}));
  Tensor s = ir::reduce("S", dims({23, 2, 25}), dims({12}), ir::ReduceKind::kSum,
                        [&](const std::vector<Var>& x, const std::vector<Var>& r) {
                          return ir::access(a, {ir::int_imm(2) * x[0] + x[1], r[0]}) *
                                 ir::access(l, {r[0], x[1], x[0] + x[2]});
                        });
  Tensor o = ir::compute("O", dims({46, 25}), [&](const std::vector<Var>& x) {
    return ir::access(
        s, {ir::floordiv(x[0], ir::int_imm(2)), ir::floormod(x[0], ir::int_imm(2)), x[1]});
  });
  const schedule::KernelSchedule sched = rules_for({o}, {a, l});
  ASSERT_EQ(sched.stages.size(), 1u) << sched.dump();
  EXPECT_EQ(sched.stages[0].skew_axis, 0) << sched.dump();
  check_graph({{o}, {a, l}}, sched, /*use_jit=*/true);
}

TEST(SkewedTiling, AZeroPaddedBandReadsOnlyWhereItsGuardHolds) {
  // Longformer's sliding window as tessera.op writes it: O[m, w] = sum_k A[m, k] * B[k, m + w
  // - 5] where that column exists, else 0. The guard is a function of m + w, so a window lane
  // reads exactly where the rows it serves would: no read leaves B.
  Tensor a = ir::placeholder("A", dims({40, 12}));
  Tensor b = ir::placeholder("B", dims({12, 40}));
  Tensor o = ir::reduce("O", dims({40, 11}), dims({12}), ir::ReduceKind::kSum,
                        [&](const std::vector<Var>& x, const std::vector<Var>& r) {
                          const Expr col = x[0] + x[1] - ir::int_imm(5);
                          return ir::select(
                              ir::ge(col, ir::int_imm(0)),
                              ir::select(ir::lt(col, ir::int_imm(40)),
                                         ir::access(a, {x[0], r[0]}) * ir::access(b, {r[0], col}),
                                         ir::float_imm(0.0)),
                              ir::float_imm(0.0));
                        });
  const schedule::KernelSchedule s = rules_for({o}, {a, b});
  ASSERT_EQ(s.stages[0].skew_axis, 0) << s.dump();
  check_graph({{o}, {a, b}}, s, /*use_jit=*/true);
  check_graph({{o}, {a, b}}, s, /*use_jit=*/false);
}

TEST(SkewedTiling, StagesWhoseReadsDoNotShareTheWindowAreNotSkewed) {
  Tensor a = ir::placeholder("A", dims({32, 8}));
  Tensor l = ir::placeholder("L", dims({8, 32 + 2 * 40}));
  Tensor sq = ir::placeholder("Q", dims({32, 32 + 40}));
  auto band = [&](const std::function<Expr(const std::vector<Var>&, const std::vector<Var>&)>& f) {
    return ir::reduce("O", dims({32, 40}), dims({8}), ir::ReduceKind::kSum, f);
  };
  const std::vector<std::pair<std::string, Tensor>> cases = {
      // Dilated: row q + 1 reads the window shifted by two lanes.
      {"q + 2w", band([&](auto& x, auto& r) {
         return ir::access(a, {x[0], r[0]}) * ir::access(l, {r[0], x[0] + ir::int_imm(2) * x[1]});
       })},
      // The rows also index another dim of the band's read.
      {"Q[q, q + w]", band([&](auto& x, auto& r) {
         return ir::access(a, {x[0], r[0]}) * ir::access(sq, {x[0], x[0] + x[1]});
       })},
      // The band's read under a guard that the window's extra lanes would not respect.
      {"guarded", band([&](auto& x, auto& r) {
         return ir::select(ir::lt(x[1], ir::int_imm(30)),
                           ir::access(a, {x[0], r[0]}) * ir::access(l, {r[0], x[0] + x[1]}),
                           ir::float_imm(0.0));
       })},
      // No read along the vector axis at all: nothing to share.
      {"no band", band([&](auto& x, auto& r) {
         return ir::access(a, {x[0], r[0]}) * ir::cast(ir::DType::kFloat32, x[1]);
       })},
  };
  for (const auto& [name, o] : cases) {
    SCOPED_TRACE(name);
    EXPECT_EQ(schedule::find_skew_axis(*o->op, o->op->body, o->dtype, 1), -1);
    const schedule::KernelSchedule s = rules_for({o}, {a, l, sq});
    EXPECT_EQ(s.stages[0].skew_axis, -1) << s.dump();
  }
}

TEST(SkewedTiling, AnAnnotationTheSkewDoesNotFitLowersAsPlainTiling) {
  // A tuner that moved the vector axis to the rows (or packs an operand) leaves a skew the
  // stage cannot take: the kernel is the plain multi-level tiling of the same numbers.
  const Band b = band_product(32, 16, 8);
  schedule::KernelSchedule s = rules_for({b.o}, {b.a, b.l});
  ASSERT_EQ(s.stages[0].skew_axis, 1);
  schedule::StageAnnotation& ann = s.stages[0];
  ann.vector_axis = 1;
  ann.tile_reg = {1, 16, 1};
  ann.tile_outer = {1, 32, 4};
  const schedule::StagePlan plan = schedule::plan_stages({b.o}, {b.a, b.l});
  EXPECT_FALSE(schedule::skewed_tiling_applies(*b.o->op, b.o->op->body, b.o->dtype, ann));
  const std::string ir = loop::to_string(schedule::lower(plan, s, "k").body);
  EXPECT_EQ(ir.find("_c in"), std::string::npos) << ir;  // no window columns
  check_graph({{b.o}, {b.a, b.l}}, s, /*use_jit=*/true);
}

TEST(SkewedTiling, TheWindowColumnsShareEachBandVectorAcrossRows) {
  // In the skewed nest the band's read does not depend on the row: one load per vector and
  // reduce step feeds every row of the register tile.
  const Band b = band_product(64, 65, 32);
  const schedule::KernelSchedule s = rules_for({b.o}, {b.a, b.l});
  ASSERT_EQ(s.stages[0].skew_axis, 1);
  const schedule::StagePlan plan = schedule::plan_stages({b.o}, {b.a, b.l});
  const std::string ir = loop::to_string(schedule::lower(plan, s, "k").body);
  const size_t update = ir.find("acc[");
  ASSERT_NE(update, std::string::npos) << ir;
  const size_t read = ir.find("L[", ir.find("= acc[", update));
  ASSERT_NE(read, std::string::npos) << ir;
  const std::string l_index = ir.substr(read, ir.find(']', read) - read);
  const std::string row = b.o->op->axes[1].var->name + "_r";
  EXPECT_NE(ir.find(row), std::string::npos) << ir;
  EXPECT_EQ(l_index.find(row), std::string::npos) << l_index;
}

}  // namespace
}  // namespace tessera::testing
