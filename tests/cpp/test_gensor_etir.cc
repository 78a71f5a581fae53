// Gensor's ETIR states and actions, the benefit formulas, the capacity check, roulette sampling
// and the walk (determinism per seed), on a fixed synthetic machine so nothing is probed.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <unordered_set>

#include "const_dims.h"
#include "ops/ops.h"
#include "schedule/lower.h"
#include "synthetic_hw.h"
#include "tune/gensor/etir.h"
#include "tune/gensor/model.h"
#include "tune/gensor/roller.h"
#include "tune/gensor/stage_space.h"
#include "tune/gensor/walk.h"

namespace tessera::tune::gensor {
namespace {

using ir::Expr;
using ir::Tensor;

using testing::dims;
using testing::synthetic_hw;

schedule::Target synthetic_target() {
  schedule::Target t;
  t.vector_lanes = 16;
  t.num_vector_registers = 32;
  t.num_threads = 2;
  t.l1_bytes = 32 << 10;
  t.l2_bytes = 1 << 20;
  return t;
}

struct MatmulSpace {
  Tensor a, b, c;
  schedule::StagePlan plan;
  StageSpace sp;
};

MatmulSpace matmul_space(int64_t m, int64_t n, int64_t k) {
  MatmulSpace ms;
  ms.a = ir::placeholder("A", dims({m, k}));
  ms.b = ir::placeholder("B", dims({k, n}));
  ms.c = ops::matmul(ms.a, ms.b);
  ms.plan = schedule::plan_stages({ms.c}, {ms.a, ms.b});
  ms.sp = make_stage_space(ms.plan, 0, synthetic_target());
  return ms;
}

EtirState apply_ok(const StageSpace& sp, const EtirState& s, ActionKind k, int iter = -1) {
  EtirState out;
  EXPECT_TRUE(apply_action(sp, s, Action{k, iter}, &out)) << action_name(k) << " " << iter;
  return out;
}

TEST(GensorEtir, TileAndInvTileRevisitTheSameState) {
  MatmulSpace ms = matmul_space(256, 256, 256);
  const StageSpace& sp = ms.sp;
  EtirState s0 = initial_state(sp);
  EXPECT_EQ(s0.level, kL2);
  EXPECT_EQ(s0.tile[kL2], (std::vector<int64_t>{1, 1, 1}));
  EtirState s1 = apply_ok(sp, s0, ActionKind::kTile, 0);
  EXPECT_EQ(s1.tile[kL2][0], 2);
  EXPECT_NE(s1, s0);
  EtirState s2 = apply_ok(sp, s1, ActionKind::kInvTile, 0);
  EXPECT_EQ(s2, s0);
  EXPECT_EQ(s2.hash(), s0.hash());
  // Deduplication: a walk tile, invTile, tile, invTile holds two distinct states.
  std::unordered_set<EtirState, EtirStateHash> seen = {s0, s1, s2,
                                                       apply_ok(sp, s2, ActionKind::kTile, 0)};
  EXPECT_EQ(seen.size(), 2u);
  // Ladder ends: no invTile below the smallest tile, no tile beyond the extent.
  EtirState out;
  EXPECT_FALSE(apply_action(sp, s0, Action{ActionKind::kInvTile, 0}, &out));
  EtirState s = s0;
  int steps = 0;
  while (apply_action(sp, s, Action{ActionKind::kTile, 2}, &out)) {
    s = out;
    ++steps;
  }
  EXPECT_EQ(s.tile[kL2][2], 256);
  EXPECT_EQ(steps, 8);  // 1 -> 2 -> ... -> 256
}

TEST(GensorEtir, CacheMovesInwardAndResetsTheNewLevel) {
  MatmulSpace ms = matmul_space(256, 256, 256);
  const StageSpace& sp = ms.sp;
  EtirState s = initial_state(sp);
  for (int i = 0; i < 5; ++i) s = apply_ok(sp, s, ActionKind::kTile, i % 3);
  ASSERT_EQ(s.tile[kL2], (std::vector<int64_t>{4, 4, 2}));
  // Only the current level's tiles and cache are offered; setVThread only at the register level.
  for (const Action& a : enumerate_actions(sp, s)) EXPECT_NE(a.kind, ActionKind::kSetVThread);
  EtirState l1 = apply_ok(sp, s, ActionKind::kCache);
  EXPECT_EQ(l1.level, kL1);
  EXPECT_EQ(l1.tile[kL2], s.tile[kL2]);
  EXPECT_EQ(l1.tile[kL1], (std::vector<int64_t>{1, 1, 2}));  // spatial reset, reduce inherited
  // L1 tiles stay inside the L2 tile.
  EtirState t = apply_ok(sp, apply_ok(sp, l1, ActionKind::kTile, 0), ActionKind::kTile, 0);
  EtirState out;
  EXPECT_FALSE(apply_action(sp, t, Action{ActionKind::kTile, 0}, &out));
  EtirState reg = apply_ok(sp, t, ActionKind::kCache);
  EXPECT_EQ(reg.level, kReg);
  bool has_cache = false, has_vthread = false;
  for (const Action& a : enumerate_actions(sp, reg)) {
    has_cache |= a.kind == ActionKind::kCache;
    has_vthread |= a.kind == ActionKind::kSetVThread;
  }
  EXPECT_FALSE(has_cache);
  EXPECT_TRUE(has_vthread);
  EtirState v = apply_ok(sp, reg, ActionKind::kSetVThread, 0);
  EXPECT_EQ(v.vthread[0], 2);
  EXPECT_EQ(effective_reg_tile(sp, v, 0), 2);
}

TEST(GensorEtir, AnnotationsOfRandomStatesLower) {
  MatmulSpace ms = matmul_space(100, 72, 40);
  const StageSpace& sp = ms.sp;
  AnalyticModel model(synthetic_hw(), ModelOptions{Eq1Form::kPrinted, 2});
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 30; ++trial) {
    // Uniformly random feasible moves (not the walk's distribution): any state the walk could
    // reach must map to an annotation the lowering accepts.
    EtirState s = initial_state(sp);
    for (int step = 0; step < 40; ++step) {
      std::vector<Action> acts = enumerate_actions(sp, s);
      Action a = acts[std::uniform_int_distribution<size_t>(0, acts.size() - 1)(rng)];
      EtirState next;
      if (apply_action(sp, s, a, &next) && model.feasible(sp, next)) s = next;
    }
    schedule::StageAnnotation ann = to_annotation(sp, s);
    for (int a = 0; a < 2; ++a) {
      EXPECT_GE(ann.tile_reg[a], 1);
      EXPECT_EQ(ann.tile_outer[a] % ann.tile_reg[a], 0);
    }
    if (ann.vector_axis >= 0) {
      EXPECT_EQ(ann.tile_reg[ann.vector_axis] % ann.vector_width, 0);
    }
    std::vector<int> order = ann.s1_order;
    std::sort(order.begin(), order.end());
    EXPECT_EQ(order, (std::vector<int>{0, 1}));
    schedule::KernelSchedule ks;
    ks.stages.push_back(ann);
    EXPECT_NO_THROW(schedule::lower(ms.plan, ks, "k")) << s.to_string(sp);
  }
}

TEST(GensorEtir, CrossLaneStageTilesPointsAndInterleavesTheReduction) {
  // GEMV as dense: y[1, N] = x[1, K] W[N, K]^T: the rules pick the cross-lane sketch.
  Tensor x = ir::placeholder("x", dims({1, 512})), w = ir::placeholder("W", dims({64, 512}));
  Tensor y = ops::dense(x, w);
  schedule::StagePlan plan = schedule::plan_stages({y}, {x, w});
  StageSpace sp = make_stage_space(plan, 0, synthetic_target());
  ASSERT_TRUE(sp.cross_lane());
  EtirState s = initial_state(sp);
  EXPECT_EQ(s.tile[kL2][2], 512);  // the whole reduction per point
  s = apply_ok(sp, apply_ok(sp, s, ActionKind::kCache), ActionKind::kCache);
  s = apply_ok(sp, s, ActionKind::kSetVThread, 2);
  schedule::StageAnnotation ann = to_annotation(sp, s);
  EXPECT_EQ(ann.sketch, schedule::Sketch::kCrossLaneReduction);
  EXPECT_EQ(ann.vector_width, 32);  // 16 lanes x 2 independent partial sums
}

// ---- model ---------------------------------------------------------------------------------

TEST(GensorModel, ProbabilitiesSumToOneAndInfeasibleStatesGetZero) {
  MatmulSpace ms = matmul_space(512, 512, 512);
  const StageSpace& sp = ms.sp;
  // A 64 KiB "L2": 32 x 32 x 32 floats (12 KiB) fit, 64 x 64 x 64 (48 KiB) fit, 128s do not.
  AnalyticModel model(synthetic_hw(64 << 10), ModelOptions{Eq1Form::kPrinted, 2});
  EtirState s = initial_state(sp);
  for (int i = 0; i < 18; ++i) s = apply_ok(sp, s, ActionKind::kTile, i % 3);
  ASSERT_EQ(s.tile[kL2], (std::vector<int64_t>{64, 64, 64}));
  EXPECT_TRUE(model.feasible(sp, s));
  EtirState bigger = apply_ok(sp, s, ActionKind::kTile, 0);
  EXPECT_FALSE(model.feasible(sp, bigger));
  EXPECT_EQ(model.benefit(sp, s, Action{ActionKind::kTile, 0}), 0.0);
  std::vector<Action> acts = enumerate_actions(sp, s);
  std::vector<double> p = transition_probabilities(sp, model, s, acts, 3, true);
  double sum = 0;
  for (size_t i = 0; i < acts.size(); ++i) {
    sum += p[i];
    EXPECT_GE(p[i], 0.0);
    if (acts[i].kind == ActionKind::kTile) {
      EXPECT_EQ(p[i], 0.0) << acts[i].to_string(sp);
    }
    if (acts[i].kind == ActionKind::kInvTile) {
      EXPECT_GT(p[i], 0.0);
    }
  }
  EXPECT_NEAR(sum, 1.0, 1e-12);
  // Over random states of a walk the distribution stays normalised.
  WalkOptions w;
  w.chains = 2;
  w.seed = 9;
  for (const EtirState& v : gensor_walk(sp, model, w).visited) {
    std::vector<Action> va = enumerate_actions(sp, v);
    std::vector<double> pv = transition_probabilities(sp, model, v, va, 5, true);
    double total = 0;
    for (double x : pv) total += x;
    if (total > 0) {
      EXPECT_NEAR(total, 1.0, 1e-12) << v.to_string(sp);
    }
    EXPECT_TRUE(model.feasible(sp, v)) << v.to_string(sp);  // the walk never enters one
  }
}

TEST(GensorModel, Eq1PrintedAndCorrectedForms) {
  MatmulSpace ms = matmul_space(256, 256, 256);
  const StageSpace& sp = ms.sp;
  AnalyticModel printed(synthetic_hw(), ModelOptions{Eq1Form::kPrinted, 2});
  AnalyticModel corrected(synthetic_hw(), ModelOptions{Eq1Form::kCorrected, 2});
  // At L1 (no parallel-efficiency factor): growing i from 1 to 2 with j = 4, k = 8.
  EtirState s = initial_state(sp);
  for (int i = 0; i < 6; ++i) s = apply_ok(sp, s, ActionKind::kTile, i % 3);
  s = apply_ok(sp, s, ActionKind::kCache);
  s = apply_ok(sp, apply_ok(sp, s, ActionKind::kTile, 1), ActionKind::kTile, 1);
  EtirState next = apply_ok(sp, s, ActionKind::kTile, 0);
  // Hand values with 64-byte lines: tile (i, j, k) -> A i x k, B k x j, C i x j, each row of
  // fewer than 16 floats costing a whole line; grid (256/i)(256/j)(256/k) tiles.
  auto F = [](double i, double k) { return 64.0 * (i + k + i); };
  auto Q = [](double i, double j, double k) {
    const double tiles = (256 / i) * (256 / j) * (256 / k);
    return tiles * 64.0 * (i + k) + (256 / i) * (256 / j) * 64.0 * i * (2 * (256 / k) - 1);
  };
  ASSERT_EQ(s.tile[kL1], (std::vector<int64_t>{1, 4, 4}));
  EXPECT_DOUBLE_EQ(printed.footprint(sp, s, kL1), F(1, 4));
  EXPECT_DOUBLE_EQ(printed.traffic(sp, s, kL1), Q(1, 4, 4));
  const double q0 = Q(1, 4, 4), q1 = Q(2, 4, 4), f0 = F(1, 4), f1 = F(2, 4);
  EXPECT_DOUBLE_EQ(printed.benefit_tile(sp, s, next), q0 * f1 / (q1 * f0));
  EXPECT_DOUBLE_EQ(corrected.benefit_tile(sp, s, next), q0 * f0 / (q1 * f1));
  // The printed form rewards the larger footprint: it exceeds the corrected one by (F'/F)^2.
  EXPECT_NEAR(printed.benefit_tile(sp, s, next) / corrected.benefit_tile(sp, s, next),
              (f1 / f0) * (f1 / f0), 1e-12);
}

TEST(GensorModel, Eq2CacheAndEq3Interleave) {
  MatmulSpace ms = matmul_space(256, 256, 256);
  const StageSpace& sp = ms.sp;
  cost::MemoryHierarchy hw = synthetic_hw();
  AnalyticModel model(hw, ModelOptions{Eq1Form::kPrinted, 2});
  EtirState s = initial_state(sp);
  for (int i = 0; i < 12; ++i) s = apply_ok(sp, s, ActionKind::kTile, i % 3);
  ASSERT_EQ(s.tile[kL2], (std::vector<int64_t>{16, 16, 16}));
  // Eq. 2 for the L2 tile: DRAM vs L2 for S = F, times the L2 utilisation S / capacity.
  const double S = 4.0 * 3 * 16 * 16;
  const double eq2 = (100.0 + S / 10.0) / (5.0 + S / 100.0);
  EXPECT_DOUBLE_EQ(model.benefit_cache(sp, s), eq2 * S / (1 << 20));
  // Eq. 3, CPU form: ceil(8 / A) / ceil(8 / A') chains for 4-cycle FMAs on 2 ports.
  EtirState reg = apply_ok(sp, apply_ok(sp, s, ActionKind::kCache), ActionKind::kCache);
  reg = apply_ok(sp, reg, ActionKind::kTile, 1);  // j register tile: 2
  reg = apply_ok(sp, reg, ActionKind::kTile, 1);  // 4
  reg = apply_ok(sp, reg, ActionKind::kTile, 1);  // 8
  reg = apply_ok(sp, reg, ActionKind::kTile, 1);  // 16 = one vector: 1 accumulator
  ASSERT_EQ(effective_reg_tile(sp, reg, 1), 16);
  EXPECT_DOUBLE_EQ(model.accumulators(sp, reg), 1.0);
  EtirState v2 = apply_ok(sp, reg, ActionKind::kSetVThread, 0);
  EXPECT_DOUBLE_EQ(model.accumulators(sp, v2), 2.0);
  EXPECT_DOUBLE_EQ(model.benefit_vthread(sp, reg, v2), 8.0 / 4.0);
  EtirState v4 = apply_ok(sp, v2, ActionKind::kSetVThread, 0);
  EtirState v8 = apply_ok(sp, v4, ActionKind::kSetVThread, 0);
  EXPECT_DOUBLE_EQ(model.benefit_vthread(sp, v4, v8), 2.0 / 1.0);
  // Beyond 8 chains more accumulators buy nothing.
  EtirState w = apply_ok(sp, v8, ActionKind::kTile, 0);
  EXPECT_DOUBLE_EQ(model.accumulators(sp, w), 16.0);
  EXPECT_DOUBLE_EQ(model.benefit_vthread(sp, v8, w), 1.0);
  EtirState out;
  EXPECT_FALSE(apply_action(sp, v8, Action{ActionKind::kSetVThread, 0}, &out));  // max 8
}

TEST(GensorModel, StagesThatFitTheLlcRefillL2FromIt) {
  // 256^3: three 256 KiB tensors, 768 KiB in all. An 8 MiB LLC holds them, a 512 KiB one not.
  MatmulSpace ms = matmul_space(256, 256, 256);
  const StageSpace& sp = ms.sp;
  AnalyticModel none(synthetic_hw(), ModelOptions{Eq1Form::kPrinted, 2});
  AnalyticModel small(synthetic_hw(1 << 20, 512 << 10), ModelOptions{Eq1Form::kPrinted, 2});
  AnalyticModel big(synthetic_hw(1 << 20, 8 << 20), ModelOptions{Eq1Form::kPrinted, 2});
  EXPECT_EQ(none.refill_level(sp).name, "dram");
  EXPECT_EQ(small.refill_level(sp).name, "dram");
  EXPECT_EQ(big.refill_level(sp).name, "llc");
  // 2 cores: DRAM saturates at 20 GB/s, the LLC's slices add up to 2 x 30.
  EXPECT_DOUBLE_EQ(none.refill_bandwidth_gbs(sp, 2), 20.0);
  EXPECT_DOUBLE_EQ(big.refill_bandwidth_gbs(sp, 2), 60.0);

  // A tile that misses L2 on every reduce step: its refill time shrinks by the bandwidth ratio,
  // the rest of the prediction does not move.
  EtirState l2 = initial_state(sp);
  for (int i = 0; i < 12; ++i) l2 = apply_ok(sp, l2, ActionKind::kTile, i % 3);
  EtirState s = apply_ok(sp, apply_ok(sp, l2, ActionKind::kCache), ActionKind::kCache);
  const schedule::StageAnnotation ann = to_annotation(sp, s);
  const Prediction from_dram = none.predict(sp, ann), from_llc = big.predict(sp, ann);
  ASSERT_GT(from_dram.dram_ms, 0);
  EXPECT_NEAR(from_llc.dram_ms, from_dram.dram_ms / 3.0, 1e-9);
  EXPECT_DOUBLE_EQ(from_llc.compute_ms, from_dram.compute_ms);
  EXPECT_DOUBLE_EQ(from_llc.l2_ms, from_dram.l2_ms);
  // Eq. 2 for the L2 tile compares L2 with where its data comes from: the LLC is closer.
  EXPECT_GT(none.benefit_cache(sp, l2), 0);
  EXPECT_LT(big.benefit_cache(sp, l2), none.benefit_cache(sp, l2));
}

TEST(GensorModel, PackingTheRowOperandRemovesItsL1ConflictsAtTheCostOfACopy) {
  // 2048^3: A's rows are 8 KiB apart, so a 12-row register tile reads 12 lines of one L1 set
  // (4 KiB set span), while the 256 x 32 B panel already fills that set's 8 ways.
  MatmulSpace ms = matmul_space(2048, 2048, 2048);
  const StageSpace& sp = ms.sp;
  ASSERT_EQ(sp.row_packable.size(), 1u);
  EXPECT_EQ(sp.row_packable[0].name, "A");
  EXPECT_EQ(sp.row_packable[0].axis, 0);
  AnalyticModel model(synthetic_hw(), ModelOptions{Eq1Form::kPrinted, 2});
  schedule::StageAnnotation ann = sp.base;
  ann.tile_reg = {12, 32};
  ann.tile_reduce = {256};
  ann.tile_outer = {96, 256};
  ann.vector_width = 16;
  schedule::StageAnnotation packed = ann;
  packed.pack.push_back("A");
  const Prediction plain = model.predict(sp, ann), with_pack = model.predict(sp, packed);
  EXPECT_GT(plain.compute_ms, with_pack.compute_ms);
  EXPECT_LT(plain.overhead_ms, with_pack.overhead_ms);
  // One row: nothing to alias, so packing only costs.
  ann.tile_reg = packed.tile_reg = {1, 32};
  EXPECT_DOUBLE_EQ(model.predict(sp, ann).compute_ms, model.predict(sp, packed).compute_ms);
}

TEST(GensorModel, AnOperandStridedAlongTheVectorIsGatheredUnlessPacked) {
  // BERT's Q K^T: B is [batch, n, k] and the vector runs along n, a row stride apart. Unpacked,
  // every lane is an element load; packed, its panels are contiguous. The stage space says
  // which operands are contiguous by themselves; the annotation's packing decides the rest.
  Tensor a = ir::placeholder("A", dims({12, 128, 64})),
         b = ir::placeholder("B", dims({12, 128, 64}));
  Tensor c = ops::batch_matmul(a, b, false, /*trans_b=*/true);
  schedule::StagePlan plan = schedule::plan_stages({c}, {a, b});
  StageSpace sp = make_stage_space(plan, 0, synthetic_target());
  ASSERT_EQ(sp.vector_axis, 2);
  AnalyticModel model(synthetic_hw(), ModelOptions{Eq1Form::kPrinted, 2});
  schedule::StageAnnotation packed = sp.base;
  packed.tile_outer = {1, 64, 64};
  packed.tile_reg = {1, 4, 32};
  packed.tile_reduce = {64};
  packed.vector_axis = 2;
  packed.vector_width = 16;
  packed.pack = {"B"};
  schedule::StageAnnotation unpacked = packed;
  unpacked.pack.clear();
  const Prediction p = model.predict(sp, packed), u = model.predict(sp, unpacked);
  // Per reduce step: 4 broadcasts and 2 vector loads packed, 4 + 32 element loads unpacked.
  EXPECT_GT(u.compute_ms, 3 * p.compute_ms);
  // The copy is a parallel loop of its own: at least one more dispatch.
  EXPECT_GE(p.overhead_ms - u.overhead_ms, 0.004);
}

TEST(GensorModel, PackedWeightPanelsAreCountedByTheirElementsNotTheirRows) {
  // ResNet res5 3x3 (512 channels, 7x7): a task of 32 output channels over the whole reduction
  // reads a 576 KiB packed weight panel, which fits the half of a 2 MiB L2 that keeps reused data,
  // and is reused down the rows.
  // Counted as the unpacked tensor's 12-byte rows, each rounded up to a 64-byte line, it would be
  // 3 MiB, refetched for every row: 5x the traffic of the same task in reduce steps of 64.
  Tensor x = ir::placeholder("X", dims({1, 512, 7, 7})),
         w = ir::placeholder("W", dims({512, 512, 3, 3}));
  const schedule::StagePlan plan =
      schedule::plan_stages({ops::conv2d(x, w, nullptr, {1, 1}, {1, 1})}, {x, w});
  const StageSpace sp =
      make_stage_space(plan, static_cast<int>(plan.stages.size()) - 1, synthetic_target());
  ASSERT_EQ(sp.base.pack, std::vector<std::string>{"W"});
  AnalyticModel model(synthetic_hw(2 << 20), ModelOptions{Eq1Form::kPrinted, 2});
  schedule::StageAnnotation whole = sp.base;
  whole.tile_outer = {1, 32, 7, 7};
  whole.tile_reg = {1, 32, 1, 7};
  whole.tile_reduce = {512, 3, 3};
  whole.vector_axis = 1;
  whole.vector_width = 16;
  whole.s1_order = {0, 1, 2, 3};
  schedule::StageAnnotation steps = whole;
  steps.tile_reduce = {64, 3, 3};
  const Prediction pw = model.predict(sp, whole), ps = model.predict(sp, steps);
  EXPECT_LE(pw.dram_ms, 1.5 * ps.dram_ms) << pw.dram_ms << " vs " << ps.dram_ms;
  EXPECT_LE(pw.total_ms, 1.5 * ps.total_ms) << pw.total_ms << " vs " << ps.total_ms;
}

TEST(GensorModel, StridedOutputAccumulatorsAreGatheredAndScatteredPerReduceTile) {
  // NCHW 1x1 convolution vectorised over output channels: each accumulator vector is 16
  // elements a plane apart in the output, reloaded and stored once per reduce tile.
  Tensor x = ir::placeholder("X", dims({1, 256, 56, 56})),
         w = ir::placeholder("W", dims({64, 256, 1, 1}));
  Tensor y = ops::conv2d(x, w, nullptr, {1, 1}, {0, 0});
  schedule::StagePlan plan = schedule::plan_stages({y}, {x, w});
  StageSpace conv =
      make_stage_space(plan, static_cast<int>(plan.stages.size()) - 1, synthetic_target());
  ASSERT_EQ(conv.base.vector_axis, 1) << conv.base.to_json().dump();
  AnalyticModel model(synthetic_hw(), ModelOptions{Eq1Form::kPrinted, 2});
  schedule::StageAnnotation whole = conv.base, short_tiles = conv.base;
  whole.tile_reduce = {256, 1, 1};
  short_tiles.tile_reduce = {4, 1, 1};
  const double conv_ratio =
      model.predict(conv, short_tiles).compute_ms / model.predict(conv, whole).compute_ms;
  // The same change on a GEMM, whose accumulators are contiguous vectors.
  MatmulSpace ms = matmul_space(3136, 64, 256);
  schedule::StageAnnotation g_whole = ms.sp.base, g_short = ms.sp.base;
  g_whole.tile_reduce = {256};
  g_short.tile_reduce = {4};
  const double gemm_ratio =
      model.predict(ms.sp, g_short).compute_ms / model.predict(ms.sp, g_whole).compute_ms;
  EXPECT_GT(conv_ratio, 3.0);
  EXPECT_GT(conv_ratio, 2 * gemm_ratio) << conv_ratio << " vs " << gemm_ratio;
}

TEST(GensorModel, AnS1AxisOfOneTileDoesNotDecideTheWriteOrder) {
  // Rows in one register tile per cache tile: whichever order s1_order lists, the sweep runs
  // along the output's contiguous axis, and the output is written in order.
  MatmulSpace ms = matmul_space(4096, 1024, 32);
  AnalyticModel model(synthetic_hw(), ModelOptions{Eq1Form::kPrinted, 2});
  schedule::StageAnnotation ann = ms.sp.base;
  ann.tile_reg = {6, 32};
  ann.tile_outer = {6, 256};
  ann.tile_reduce = {32};
  schedule::StageAnnotation rows_listed_last = ann;
  ann.s1_order = {0, 1};
  rows_listed_last.s1_order = {1, 0};
  EXPECT_DOUBLE_EQ(model.predict(ms.sp, ann).dram_ms,
                   model.predict(ms.sp, rows_listed_last).dram_ms);
  // With several row tiles the sweep does run down the rows, and pays for it.
  ann.tile_outer = rows_listed_last.tile_outer = {48, 256};
  EXPECT_LT(model.predict(ms.sp, ann).dram_ms, model.predict(ms.sp, rows_listed_last).dram_ms);
}

schedule::StageAnnotation gemm_6x64(const StageSpace& sp, std::vector<int64_t> outer, int64_t kc) {
  schedule::StageAnnotation ann = sp.base;
  ann.tile_reg = {6, 64};
  ann.tile_outer = std::move(outer);
  ann.tile_reduce = {kc};
  ann.vector_axis = 1;
  ann.vector_width = 16;
  ann.s1_order = {1, 0};  // rows swept innermost: the B panel is reused across the sweep
  ann.pack = {"B"};
  return ann;
}

TEST(GensorModel, TaskTrafficKeepsWhatOneLoopIterationFitsAndStreamsTheRest) {
  // GEMM 2048, tasks of 510 x 128 over the whole k, no LLC (refills from DRAM at 20 GB/s).
  MatmulSpace ms = matmul_space(2048, 2048, 2048);
  const schedule::StageAnnotation ann = gemm_6x64(ms.sp, {510, 128}, 2048);
  const double tasks = 5 * 16, f = 4;
  // 2 MiB L2, half of which keeps reused data: one step of the row sweep touches 6 rows of A, the
  // 2048 x 64 B panel and 6 x 64 of C (562 KiB): the panel stays over the sweep. One step of the
  // loop over the two column tiles touches all 510 rows of A (4 MiB): A is read again for the
  // second one. C: read and written.
  const double a_bytes = 510 * 2048 * f * 2, b_bytes = 2048 * 128 * f, c_bytes = 510 * 128 * f * 2;
  // Rows swept innermost write the output down its columns: the write-order term.
  const double write_order = 1.3 * 2048 * 2048 * f;
  AnalyticModel model(synthetic_hw(2 << 20), ModelOptions{Eq1Form::kPrinted, 2});
  EXPECT_NEAR(model.predict(ms.sp, ann).dram_ms,
              (tasks * (a_bytes + b_bytes + c_bytes) + write_order) / 20e6, 1e-9);
  // 512 KiB L2: the panel no longer fits next to the rows, and every register tile of the sweep
  // fetches it again (85 per column tile).
  AnalyticModel small_l2(synthetic_hw(512 << 10), ModelOptions{Eq1Form::kPrinted, 2});
  const double b_refetched = 2048 * 64 * f * 85 * 2;
  EXPECT_NEAR(small_l2.predict(ms.sp, ann).dram_ms,
              (tasks * (a_bytes + b_refetched + c_bytes) + write_order) / 20e6, 1e-9);
}

TEST(GensorModel, TallTasksOverTheWholeReductionOutrankShortSweepsOfL2SizedTasks) {
  // GEMM 2048 on this host's cache sizes (2 MiB L2, an LLC holding all three tensors). Measured
  // with 6x64 tiles: 96 x 256 tasks in k steps of 128 (fit L2 whole; a 32 KiB B panel from the LLC
  // every 16 register tiles) 0.85x torch.mm, 510 x 128 tasks over the whole k (a 512 KiB panel
  // per 85 tiles, A streaming) 0.92-0.96x.
  MatmulSpace ms = matmul_space(2048, 2048, 2048);
  AnalyticModel model(synthetic_hw(2 << 20, 64 << 20), ModelOptions{Eq1Form::kPrinted, 2});
  const Prediction blocked = model.predict(ms.sp, gemm_6x64(ms.sp, {96, 256}, 128));
  const Prediction streamed = model.predict(ms.sp, gemm_6x64(ms.sp, {510, 128}, 2048));
  EXPECT_LT(streamed.total_ms, blocked.total_ms);
  // The difference is the panel bursts of the short sweeps and the accumulators reloaded at the
  // start of each k step.
  EXPECT_GT(blocked.overhead_ms - streamed.overhead_ms,
            0.3 * (blocked.total_ms - streamed.total_ms));
  EXPECT_GT(blocked.compute_ms - streamed.compute_ms, 0.3 * (blocked.total_ms - streamed.total_ms));
}

TEST(GensorModel, AnUnpackedVectorOperandWithRowsAPageApartWaitsEveryStep) {
  // GEMM 1024: B's rows are 4 KiB apart, so unpacked, every reduce step reads another page.
  AnalyticModel model(synthetic_hw(2 << 20, 64 << 20), ModelOptions{Eq1Form::kPrinted, 2});
  MatmulSpace square = matmul_space(1024, 1024, 1024);
  schedule::StageAnnotation packed = gemm_6x64(square.sp, {516, 128}, 1024), unpacked = packed;
  unpacked.pack.clear();
  EXPECT_GT(model.predict(square.sp, unpacked).compute_ms,
            1.4 * model.predict(square.sp, packed).compute_ms);
  // With 64 columns B's rows are 256 bytes apart: unpacked, it is read as it is, at no cost.
  MatmulSpace narrow = matmul_space(1024, 64, 1024);
  packed = gemm_6x64(narrow.sp, {516, 64}, 1024);
  unpacked = packed;
  unpacked.pack.clear();
  EXPECT_DOUBLE_EQ(model.predict(narrow.sp, unpacked).compute_ms,
                   model.predict(narrow.sp, packed).compute_ms);
}

TEST(GensorModel, ReusedDataOverHalfOfL2IsPartlyRefetched) {
  // GEMM 2048 over the whole k, 1026 x 128 tasks, columns swept inside rows: both B panels of a
  // task (1 MiB) are reused across the rows. A 4 MiB L2 keeps them whole, a 2 MiB one in part,
  // a 1 MiB one not at all.
  MatmulSpace ms = matmul_space(2048, 2048, 2048);
  schedule::StageAnnotation ann = gemm_6x64(ms.sp, {1026, 128}, 2048);
  ann.s1_order = {0, 1};
  auto dram = [&](int64_t l2_bytes) {
    AnalyticModel m(synthetic_hw(l2_bytes), ModelOptions{Eq1Form::kPrinted, 2});
    return m.predict(ms.sp, ann).dram_ms;
  };
  EXPECT_LT(dram(4 << 20), dram(2 << 20));
  EXPECT_LT(dram(2 << 20), dram(1 << 20));
}

TEST(GensorModel, AnAliasingOutputBlockGetsTheWaysTheOtherOperandsLeave) {
  // 2 MiB 16-way L2 (128 KiB set span). 192 x 128 C blocks over k steps of 1024: C's 8 KiB rows
  // put 12 lines into each set they use, within 16 ways alone, but A's and B's 1.25 MiB leave
  // 6 ways of each set: C is read back on every reduce step.
  MatmulSpace ms = matmul_space(2048, 2048, 2048);
  cost::MemoryHierarchy hw = synthetic_hw(2 << 20), unknown_ways = hw;
  hw.levels[cost::kLevelL2].ways = 16;
  unknown_ways.levels[cost::kLevelL2].ways = 0;
  AnalyticModel model(hw, ModelOptions{Eq1Form::kPrinted, 2});
  AnalyticModel capacity_only(unknown_ways, ModelOptions{Eq1Form::kPrinted, 2});
  const schedule::StageAnnotation ann = gemm_6x64(ms.sp, {192, 128}, 1024);
  EXPECT_GT(model.predict(ms.sp, ann).dram_ms, 1.2 * capacity_only.predict(ms.sp, ann).dram_ms);
}

TEST(GensorModel, ReduceTilesAfterTheFirstWaitForTheirAccumulators) {
  // GEMM 2048, 96 x 256 tasks in k steps of 128: each register tile reloads its accumulators 15
  // times. From L2 when the task's C block stays there (4 MiB L2), from outside when it does
  // not (256 KiB L2): the wait is on the critical path, in the compute time.
  MatmulSpace ms = matmul_space(2048, 2048, 2048);
  const schedule::StageAnnotation ann = gemm_6x64(ms.sp, {96, 256}, 128);
  AnalyticModel kept(synthetic_hw(4 << 20, 64 << 20), ModelOptions{Eq1Form::kPrinted, 2});
  AnalyticModel evicted(synthetic_hw(256 << 10, 64 << 20), ModelOptions{Eq1Form::kPrinted, 2});
  EXPECT_GT(evicted.predict(ms.sp, ann).compute_ms, 1.03 * kept.predict(ms.sp, ann).compute_ms);
  // Over the whole k there is nothing to reload.
  const schedule::StageAnnotation whole = gemm_6x64(ms.sp, {96, 256}, 2048);
  EXPECT_DOUBLE_EQ(evicted.predict(ms.sp, whole).compute_ms, kept.predict(ms.sp, whole).compute_ms);
}

TEST(GensorModel, OutputBlocksWhoseRowsAliasInL2SetsAreReadBackEveryReduceStep) {
  // 2 MiB 8-way L2: a set span of 256 KiB. GEMM 2048's C rows are 8 KiB apart, so 32 rows share
  // one set. The same L2 with its associativity unknown (0 ways) checks capacity only.
  MatmulSpace ms = matmul_space(2048, 2048, 2048);
  cost::MemoryHierarchy unknown_ways = synthetic_hw(2 << 20);
  unknown_ways.levels[cost::kLevelL2].ways = 0;
  AnalyticModel model(synthetic_hw(2 << 20), ModelOptions{Eq1Form::kPrinted, 2});
  AnalyticModel capacity_only(unknown_ways, ModelOptions{Eq1Form::kPrinted, 2});
  auto dram = [&](const AnalyticModel& m, std::vector<int64_t> outer, int64_t kc) {
    schedule::StageAnnotation ann = gemm_6x64(ms.sp, std::move(outer), kc);
    ann.pack = {"A", "B"};
    return m.predict(ms.sp, ann).dram_ms;
  };
  // 264 x 128 blocks over k steps of 512 fit L2 (about 1 MiB), but put 9 lines into a set of 8:
  // the C block is read back from outside on each of the 4 reduce steps.
  EXPECT_GT(dram(model, {264, 128}, 512), 1.3 * dram(capacity_only, {264, 128}, 512));
  // 96 x 256 blocks put 3 lines into each set they use and stay.
  EXPECT_DOUBLE_EQ(dram(model, {96, 256}, 512), dram(capacity_only, {96, 256}, 512));
}

TEST(GensorModel, RegisterFileIsACapacity) {
  MatmulSpace ms = matmul_space(256, 256, 256);
  const StageSpace& sp = ms.sp;
  AnalyticModel model(synthetic_hw(), ModelOptions{Eq1Form::kPrinted, 2});
  EtirState base = initial_state(sp);
  for (int i = 0; i < 18; ++i) base = apply_ok(sp, base, ActionKind::kTile, i % 3);
  base = apply_ok(sp, apply_ok(sp, base, ActionKind::kCache), ActionKind::kCache);
  // Rows grown until the tile no longer fits 32 - 1 spare registers.
  auto grow_rows = [&](EtirState s, int* rows) {
    *rows = 1;
    EtirState next;
    while (apply_action(sp, s, Action{ActionKind::kTile, 0}, &next) && model.feasible(sp, next)) {
      s = next;
      ++*rows;
    }
    return s;
  };
  // Two vectors of j: rows x 2 accumulators + 2 B vectors + 1 broadcast (renamed in flight, so
  // one architectural register however many FMAs it feeds) <= 31.
  EtirState s = base;
  for (int i = 0; i < 5; ++i) s = apply_ok(sp, s, ActionKind::kTile, 1);
  ASSERT_EQ(effective_reg_tile(sp, s, 1), 32);
  int rows = 0;
  s = grow_rows(s, &rows);
  EXPECT_EQ(model.registers_needed(sp, s), 2 * rows + 2 + 1);
  EXPECT_EQ(rows, 14);
  EXPECT_EQ(model.benefit(sp, s, Action{ActionKind::kTile, 0}), 0.0);
  // Four vectors: 6 rows fit (24 + 4 + 1), 7 do not (28 + 4 + 1).
  EtirState wide = base;
  for (int i = 0; i < 8 && effective_reg_tile(sp, wide, 1) < 64; ++i) {
    wide = apply_ok(sp, wide, ActionKind::kTile, 1);
  }
  ASSERT_EQ(effective_reg_tile(sp, wide, 1), 64);
  wide = grow_rows(wide, &rows);
  EXPECT_EQ(rows, 6);
  EXPECT_EQ(model.registers_needed(sp, wide), 4 * 6 + 4 + 1);
  // The same count for a register tile given by its extents.
  EXPECT_EQ(model.registers_for_tile(sp, {6, 64}), 4 * 6 + 4 + 1);
  EXPECT_TRUE(model.register_tile_fits(sp, {6, 64}));
  EXPECT_FALSE(model.register_tile_fits(sp, {7, 64}));
}

// ---- walk ----------------------------------------------------------------------------------

TEST(GensorWalk, RouletteIsCumulative) {
  const std::vector<double> w = {0.0, 1.0, 3.0, 0.0};
  EXPECT_EQ(roulette(w, 0.0), 1);
  EXPECT_EQ(roulette(w, 0.24), 1);
  EXPECT_EQ(roulette(w, 0.26), 2);
  EXPECT_EQ(roulette(w, 0.999999), 2);
  EXPECT_EQ(roulette({0.0, 0.0}, 0.5), -1);
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> u(0, 1);
  const std::vector<double> p = {0.1, 0.6, 0.3};
  std::vector<int> count(3, 0);
  const int n = 20000;
  for (int i = 0; i < n; ++i) ++count[roulette(p, u(rng))];
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(count[i] / static_cast<double>(n), p[i], 0.015);
}

TEST(GensorWalk, AnnealingAndKeepProbabilities) {
  EXPECT_DOUBLE_EQ(anneal_factor(10), 1.5);
  EXPECT_NEAR(anneal_factor(0), 0.5, 1e-12);
  EXPECT_LT(anneal_factor(5), anneal_factor(20));
  EXPECT_NEAR(keep_probability(std::exp(-10.0)), 0.5, 1e-12);
  EXPECT_GT(keep_probability(1.0), 0.99);
  EXPECT_LT(keep_probability(std::ldexp(1.0, -40)), 0.01);
}

TEST(GensorWalk, DeterministicPerSeed) {
  MatmulSpace ms = matmul_space(384, 256, 320);
  AnalyticModel model(synthetic_hw(), ModelOptions{Eq1Form::kPrinted, 2});
  auto hashes = [&](uint64_t seed) {
    WalkOptions w;
    w.seed = seed;
    w.chains = 3;
    std::vector<uint64_t> h;
    for (const EtirState& s : gensor_walk(ms.sp, model, w).visited) h.push_back(s.hash());
    return h;
  };
  std::vector<uint64_t> a = hashes(1), b = hashes(1), c = hashes(2);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_GT(a.size(), 20u);
  WalkOptions w;
  w.seed = 1;
  w.chains = 3;
  WalkResult r = gensor_walk(ms.sp, model, w);
  EXPECT_EQ(r.finals.size(), 3u);
  EXPECT_GT(r.revisits, 0);  // invTile makes revisits normal
  // Without interleave no state has a virtual thread.
  w.interleave = false;
  for (const EtirState& s : gensor_walk(ms.sp, model, w).visited) {
    for (int64_t v : s.vthread) EXPECT_EQ(v, 1);
  }
}

TEST(GensorWalk, RollerIsGreedyAndGrowOnly) {
  MatmulSpace ms = matmul_space(384, 256, 320);
  AnalyticModel model(synthetic_hw(), ModelOptions{Eq1Form::kPrinted, 2});
  RollerResult r = roller_construct(ms.sp, model);
  ASSERT_GE(r.path.size(), 3u);
  EXPECT_EQ(r.path.back().level, kReg);
  for (size_t i = 1; i < r.path.size(); ++i) {
    const EtirState &a = r.path[i - 1], &b = r.path[i];
    EXPECT_TRUE(model.feasible(ms.sp, b));
    for (int64_t v : b.vthread) EXPECT_EQ(v, 1);
    if (b.level == a.level) {
      // One tile grew, nothing shrank.
      int grown = 0;
      for (int d = 0; d < ms.sp.num_iters(); ++d) {
        EXPECT_GE(b.tile[a.level][d], a.tile[a.level][d]);
        grown += b.tile[a.level][d] > a.tile[a.level][d];
      }
      EXPECT_EQ(grown, 1);
    } else {
      EXPECT_EQ(b.level, a.level + 1);
    }
  }
  // Deterministic: no randomness in Roller.
  EXPECT_EQ(roller_construct(ms.sp, model).path.back(), r.path.back());
}

}  // namespace
}  // namespace tessera::tune::gensor
