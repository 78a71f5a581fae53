// The mid tile level of multi-level tiling (StageAnnotation::tile_mid, Ansor's S0 S1 R0 S2 R1 S3):
// schedules without it keep their text and their loop IR; four-level schedules nest the mid-tile
// loops outside the outer reduce loop and build kernels that agree with the reference (GEMM, a
// convolution behind its pad stage, a batched matmul with a fused bias + relu, row sums short and
// long), also where mid tiles cross the end of an axis; broken mid tiles are rejected with an
// error; search mode samples, mutates and crosses four-level schedules; the analytic model ranks
// them.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "const_dims.h"
#include "e2e_harness.h"
#include "loop/printer.h"
#include "ops/ops.h"
#include "schedule/default_schedule.h"
#include "synthetic_hw.h"
#include "tune/common.h"
#include "tune/gensor/model.h"
#include "tune/search/space.h"
#include "util/check.h"

namespace tessera {
namespace {

using ir::Tensor;
using schedule::KernelSchedule;
using schedule::Sketch;
using schedule::StageAnnotation;
using testing::dims;

struct Named {
  std::string name;
  testing::Graph graph;
};

// The stages the task asks for: a GEMM with edges on every axis, a convolution (pad stage +
// reduction), a batched matmul whose bias + relu is a fused epilogue, and row sums (one short,
// one long enough for the lowering's chunked accumulators).
std::vector<Named> graphs() {
  std::vector<Named> out;
  Tensor a = ir::placeholder("A", dims({45, 29})), b = ir::placeholder("B", dims({29, 70}));
  out.push_back({"gemm", {{ops::matmul(a, b)}, {a, b}}});
  Tensor x = ir::placeholder("X", dims({1, 6, 11, 11})),
         w = ir::placeholder("W", dims({16, 6, 3, 3}));
  out.push_back({"conv", {{ops::conv2d(x, w, nullptr, {1, 1}, {1, 1})}, {x, w}}});
  Tensor p = ir::placeholder("P", dims({3, 21, 19})), q = ir::placeholder("Q", dims({3, 19, 40}));
  Tensor bias = ir::placeholder("bias", dims({40}));
  out.push_back(
      {"bmm_bias_relu", {{ops::relu(ops::add(ops::batch_matmul(p, q), bias))}, {p, q, bias}}});
  Tensor s = ir::placeholder("S", dims({37, 90}));
  out.push_back({"row_sum", {{ops::reduce_sum(s, {1})}, {s}}});
  Tensor l = ir::placeholder("L", dims({20, 9000}));
  out.push_back({"long_row_sum", {{ops::reduce_sum(l, {1})}, {l}}});
  return out;
}

schedule::StagePlan plan_of(const testing::Graph& g) {
  return schedule::plan_stages(g.outputs, g.inputs);
}

std::string lowered_text(const testing::Graph& g, const KernelSchedule& s) {
  const schedule::StagePlan plan = schedule::plan_stages(g.outputs, g.inputs, s.plan);
  return loop::to_string(schedule::lower(plan, s, "kernel"));
}

// Position of `needle` in `text`, failing the test when absent.
size_t position(const std::string& text, const std::string& needle) {
  const size_t p = text.find(needle);
  EXPECT_NE(p, std::string::npos) << "'" << needle << "' not in\n" << text;
  return p;
}

TEST(MidTiles, WithoutAMidLevelSchedulesKeepTheirTextAndLoopIR) {
  for (const Named& n : graphs()) {
    SCOPED_TRACE(n.name);
    const KernelSchedule rules =
        schedule::default_schedule(plan_of(n.graph), schedule::Target::host());
    // tile_mid == tile_outer is the same kernel as no tile_mid: same text, same loop IR.
    KernelSchedule spelled = rules;
    for (StageAnnotation& a : spelled.stages) a.tile_mid = a.tile_outer;
    EXPECT_EQ(spelled.stages_text(), rules.stages_text());
    EXPECT_EQ(rules.stages_text().find("tile_mid"), std::string::npos);
    EXPECT_EQ(lowered_text(n.graph, spelled), lowered_text(n.graph, rules));
    EXPECT_EQ(lowered_text(n.graph, rules).find("_mt"), std::string::npos)
        << "no mid-tile loops without a mid level";
  }
}

TEST(MidTiles, OldJsonParsesToTheSameText) {
  // A record written before tile_mid existed.
  const std::string old =
      R"({"stages":[{"op":"matmul","pack":["B"],"parallel":true,"reduce_unroll":4,)"
      R"("s1_order":[1,0],"sketch":"multi_level_tiling","tile_outer":[20,256],)"
      R"("tile_reduce":[64],"tile_reg":[5,64],"vector_axis":1,"vector_width":16}],)"
      R"("tuner":"construct"})";
  const KernelSchedule k = KernelSchedule::parse(old);
  EXPECT_TRUE(k.stages[0].tile_mid.empty());
  EXPECT_FALSE(k.stages[0].has_mid_level());
  EXPECT_EQ(k.stages[0].mid_tiles(), k.stages[0].tile_outer);
  EXPECT_EQ(k.stages_text(), util::Json::parse(old).at("stages").dump());
  // A four-level stage writes its mid tiles and reads them back.
  KernelSchedule four = k;
  four.stages[0].tile_mid = {10, 128};
  EXPECT_NE(four.stages_text().find(R"("tile_mid":[10,128])"), std::string::npos);
  const KernelSchedule back = KernelSchedule::parse(four.dump());
  EXPECT_EQ(back.stages[0].tile_mid, (std::vector<int64_t>{10, 128}));
  EXPECT_EQ(back.stages_text(), four.stages_text());
}

// A GEMM stage with hand-picked tiles: 45 x 70 over k 29, register tile 3 x 8.
StageAnnotation gemm_stage(std::vector<int64_t> outer, std::vector<int64_t> mid,
                           int64_t reduce_tile) {
  StageAnnotation a;
  a.op = "matmul";
  a.tile_outer = std::move(outer);
  a.tile_mid = std::move(mid);
  a.tile_reg = {3, 8};
  a.tile_reduce = {reduce_tile};
  a.vector_axis = 1;
  a.vector_width = 8;
  a.s1_order = {0, 1};
  return a;
}

TEST(MidTiles, MidLoopsSitOutsideTheOuterReduceLoop) {
  const testing::Graph g = graphs()[0].graph;
  KernelSchedule s;
  s.stages = {gemm_stage({18, 48}, {9, 16}, 8)};
  const std::string text = lowered_text(g, s);
  // S0 tile, S1 mid tiles, R0, S2 register tiles of the mid tile, R1 (the register tile S3 is
  // also looped over before R1, to initialise its accumulators).
  const size_t tile = position(text, "for tile in"), i_mt = position(text, "for i_mt in"),
               j_mt = position(text, "for j_mt in"), k_o = position(text, "for k_o in"),
               i_m = position(text, "for i_m in"), j_m = position(text, "for j_m in"),
               k_i = position(text, "for k_i");
  EXPECT_LT(tile, i_mt);
  EXPECT_LT(i_mt, j_mt);  // s1_order {0, 1}
  EXPECT_LT(j_mt, k_o);
  EXPECT_LT(k_o, i_m);
  EXPECT_LT(i_m, j_m);
  EXPECT_LT(j_m, k_i);
  // Trip counts: 18 / 9 mid tiles of 9 / 3 register tiles along i, 48 / 16 of 16 / 8 along j.
  EXPECT_NE(text.find("for i_mt in [0, 2)"), std::string::npos) << text;
  EXPECT_NE(text.find("for j_mt in [0, 3)"), std::string::npos) << text;
  EXPECT_NE(text.find("for i_m in [0, 3)"), std::string::npos) << text;
  EXPECT_NE(text.find("for j_m in [0, 2)"), std::string::npos) << text;
  testing::check_graph(g, s, /*use_jit=*/true);
}

TEST(MidTiles, HandPickedEdgesMatchTheReference) {
  const testing::Graph g = graphs()[0].graph;
  // 45 rows in cache tiles of 18: the last one holds 9 rows, so its second mid tile of 9 lies
  // wholly past the end (skipped); 70 columns in cache tiles of 48 cut a mid tile of 16 in half
  // (the vector axis: masked lanes) and leave one past the end; a reduce tile of 8 over k 29
  // leaves a partial last R0 tile. Mid tile = register tile (S2 of one trip) and a mid level on
  // one axis only are legal too.
  const std::vector<StageAnnotation> stages = {
      gemm_stage({18, 48}, {9, 16}, 8),   gemm_stage({18, 48}, {3, 8}, 8),
      gemm_stage({18, 48}, {18, 16}, 29), gemm_stage({45, 72}, {15, 24}, 5),
      gemm_stage({18, 48}, {6, 48}, 8),
  };
  for (const StageAnnotation& st : stages) {
    KernelSchedule s;
    s.stages = {st};
    SCOPED_TRACE(s.dump());
    EXPECT_TRUE(st.has_mid_level());
    testing::check_graph(g, s, /*use_jit=*/true);
    testing::check_graph(g, s, /*use_jit=*/false);
  }
  // No vector axis (scalar edge tiles) and an unrolled, hinted reduction.
  StageAnnotation scalar = gemm_stage({18, 48}, {9, 16}, 8);
  scalar.vector_axis = -1;
  scalar.vector_width = 1;
  scalar.reduce_unroll = 4;
  scalar.prefetch = true;
  KernelSchedule s;
  s.stages = {scalar};
  testing::check_graph(g, s, /*use_jit=*/true);
}

TEST(MidTiles, FusedEpilogueRunsAfterTheWholeReduction) {
  // Several R0 tiles per register tile inside mid tiles: partial sums pass through the output,
  // and relu applied to a partial (negative partial sums clipped) would not match the reference.
  const testing::Graph g = graphs()[2].graph;
  const schedule::StagePlan plan = plan_of(g);
  ASSERT_EQ(plan.stages.size(), 1u);
  ASSERT_TRUE(plan.stages[0].epilogue != nullptr) << "bias + relu fused into the batched matmul";
  KernelSchedule s = schedule::default_schedule(plan, schedule::Target::host());
  StageAnnotation& a = s.stages[0];
  a.sketch = Sketch::kMultiLevelTiling;
  a.tile_reg = {1, 3, 8};
  a.tile_outer = {1, 12, 48};
  a.tile_mid = {1, 6, 16};
  a.vector_axis = 2;
  a.vector_width = 8;
  a.tile_reduce = {4};
  a.pack.clear();
  a.s1_order = {0, 2, 1};
  testing::check_graph(g, s, /*use_jit=*/true);
  testing::check_graph(g, s, /*use_jit=*/false);
}

TEST(MidTiles, BrokenMidTilesAreRejected) {
  const testing::Graph g = graphs()[0].graph;
  const schedule::StagePlan plan = plan_of(g);
  auto lowers = [&](const StageAnnotation& st) {
    KernelSchedule s;
    s.stages = {st};
    schedule::lower(plan, s, "kernel");
  };
  EXPECT_THROW(lowers(gemm_stage({18, 48}, {9, 12}, 8)), Error) << "12 is not a multiple of 8";
  EXPECT_THROW(lowers(gemm_stage({18, 48}, {9, 32}, 8)), Error) << "32 does not divide 48";
  EXPECT_THROW(lowers(gemm_stage({18, 48}, {9}, 8)), Error) << "one mid tile per axis";
  EXPECT_THROW(lowers(gemm_stage({18, 48}, {0, 16}, 8)), Error);
  Tensor a = ir::placeholder("A", dims({45, 29})), b = ir::placeholder("B", dims({29, 70}));
  tune::Task task = tune::Task::create({ops::matmul(a, b)}, {a, b}, "gemm");
  tune::search::SearchSpace space(task);
  EXPECT_NE(space.check_stage(0, gemm_stage({18, 48}, {9, 12}, 8)), "");
  EXPECT_NE(space.check_stage(0, gemm_stage({18, 48}, {9, 32}, 8)), "");
  EXPECT_NE(space.check_stage(0, gemm_stage({18, 48}, {9}, 8)), "");
  EXPECT_EQ(space.check_stage(0, gemm_stage({18, 48}, {9, 16}, 8)), "");
}

// Up to `want` schedules from the space whose tiled stages have a mid level on some stage.
std::vector<KernelSchedule> four_level_samples(const tune::search::SearchSpace& space, int want,
                                               std::mt19937_64& rng) {
  std::vector<KernelSchedule> out;
  for (int tries = 0; tries < 400 && static_cast<int>(out.size()) < want; ++tries) {
    KernelSchedule s = space.sample(rng);
    bool four = false;
    for (const StageAnnotation& a : s.stages) four = four || a.has_mid_level();
    if (four) out.push_back(std::move(s));
  }
  return out;
}

TEST(MidTiles, RandomFourLevelSchedulesMatchTheReference) {
  for (const Named& n : graphs()) {
    SCOPED_TRACE(n.name);
    tune::Task task = tune::Task::create(n.graph.outputs, n.graph.inputs, n.name);
    tune::search::SearchSpace space(task);
    std::mt19937_64 rng(17);
    const std::vector<KernelSchedule> samples = four_level_samples(space, 6, rng);
    ASSERT_EQ(samples.size(), 6u) << "the space samples four-level schedules";
    for (size_t i = 0; i < samples.size(); ++i) {
      SCOPED_TRACE(samples[i].dump());
      EXPECT_EQ(space.check_structure(samples[i]), "");
      EXPECT_NE(lowered_text(n.graph, samples[i]).find("_mt in"), std::string::npos);
      // JIT for most; the interpreter also runs the loop IR as lowered for a few.
      testing::check_graph(n.graph, samples[i], /*use_jit=*/true);
      if (i < 2) testing::check_graph(n.graph, samples[i], /*use_jit=*/false);
    }
  }
}

TEST(MidTiles, MutationsAndCrossoverKeepFourLevelSchedulesValid) {
  for (const Named& n : graphs()) {
    SCOPED_TRACE(n.name);
    tune::Task task = tune::Task::create(n.graph.outputs, n.graph.inputs, n.name);
    tune::search::SearchSpace space(task);
    std::mt19937_64 rng(23);
    const std::vector<KernelSchedule> parents = four_level_samples(space, 4, rng);
    ASSERT_EQ(parents.size(), 4u);
    int made_mid = 0, dropped_mid = 0;
    std::vector<KernelSchedule> children;
    for (int i = 0; i < 60; ++i) {
      const KernelSchedule& p = parents[i % parents.size()];
      std::optional<KernelSchedule> c =
          i % 3 == 2 ? space.crossover(p, parents[(i + 1) % parents.size()], rng)
                     : space.mutate(p, tune::search::Mutation::kTileSize, rng);
      if (!c) continue;
      EXPECT_EQ(space.check_structure(*c), "") << c->dump();
      for (size_t s = 0; s < c->stages.size(); ++s) {
        const StageAnnotation &cs = c->stages[s], &ps = p.stages[s];
        // Mid tiles are written only when they split a cache tile.
        EXPECT_TRUE(cs.tile_mid.empty() || cs.has_mid_level()) << c->dump();
        made_mid += cs.has_mid_level() && !ps.has_mid_level();
        dropped_mid += !cs.has_mid_level() && ps.has_mid_level();
      }
      if (children.size() < 4) children.push_back(*c);
    }
    EXPECT_GT(made_mid + dropped_mid, 0) << "factors move into and out of the mid level";
    for (const KernelSchedule& c : children) {
      SCOPED_TRACE(c.dump());
      testing::check_graph(n.graph, c, /*use_jit=*/true);
    }
  }
}

TEST(MidTiles, TileSizeMovesAFactorBetweenTwoOfFourLevels) {
  Tensor a = ir::placeholder("A", dims({48, 64})), b = ir::placeholder("B", dims({64, 96}));
  tune::Task task = tune::Task::create({ops::matmul(a, b)}, {a, b}, "gemm");
  tune::search::SearchSpace space(task);
  std::mt19937_64 rng(31);
  int moves = 0;
  std::vector<int> level_changes(4, 0);  // S0 count, S1, S2, S3
  for (int i = 0; i < 200; ++i) {
    const KernelSchedule p = space.sample(rng);
    if (p.stages[0].sketch != Sketch::kMultiLevelTiling) continue;
    std::optional<KernelSchedule> c = space.mutate(p, tune::search::Mutation::kTileSize, rng);
    if (!c || c->stages[0].tile_reduce != p.stages[0].tile_reduce) continue;
    const StageAnnotation &ps = p.stages[0], &cs = c->stages[0];
    int axes_changed = 0;
    for (size_t ax = 0; ax < 2; ++ax) {
      const int64_t e = ax == 0 ? 48 : 96;
      auto levels = [&](const StageAnnotation& s) {
        const int64_t mid = s.mid_tiles()[ax];
        return std::vector<int64_t>{(e + s.tile_outer[ax] - 1) / s.tile_outer[ax],
                                    s.tile_outer[ax] / mid, mid / s.tile_reg[ax], s.tile_reg[ax]};
      };
      const std::vector<int64_t> lp = levels(ps), lc = levels(cs);
      if (lp == lc) continue;
      ++axes_changed;
      int changed = 0;
      for (int l = 0; l < 4; ++l) {
        changed += lp[l] != lc[l];
        level_changes[l] += lp[l] != lc[l];
      }
      EXPECT_EQ(changed, 2) << ps.to_json().dump() << " -> " << cs.to_json().dump();
    }
    EXPECT_EQ(axes_changed, 1);
    ++moves;
  }
  EXPECT_GT(moves, 30);
  for (int l = 0; l < 4; ++l) EXPECT_GT(level_changes[l], 0) << "level S" << l << " never moved";
}

TEST(MidTiles, AnalyticModelRanksFourLevelSchedules) {
  Tensor a = ir::placeholder("A", dims({256, 256})), b = ir::placeholder("B", dims({256, 256}));
  const schedule::StagePlan plan = schedule::plan_stages({ops::matmul(a, b)}, {a, b});
  schedule::Target target;
  target.vector_lanes = 16;
  const tune::gensor::StageSpace sp = tune::gensor::make_stage_space(plan, 0, target);
  const tune::gensor::AnalyticModel model(testing::synthetic_hw(), tune::gensor::ModelOptions{});
  StageAnnotation three = sp.base;
  three.tile_reg = {6, 32};
  three.tile_outer = {48, 256};
  three.tile_reduce = {64};
  three.vector_axis = 1;
  three.vector_width = 16;
  StageAnnotation same = three;
  same.tile_mid = three.tile_outer;
  const double t3 = model.predict(sp, three).total_ms;
  EXPECT_EQ(model.predict(sp, same).total_ms, t3) << "tile_mid == tile_outer is three-level";
  StageAnnotation four = three;
  four.tile_mid = {24, 64};
  const double t4 = model.predict(sp, four).total_ms;
  EXPECT_TRUE(std::isfinite(t4) && t4 > 0);
  // The same FMAs in the same register tiles: only the traffic terms may move, not the order of
  // magnitude.
  EXPECT_LT(t4, 4 * t3);
  EXPECT_GT(t4, t3 / 4);
}

}  // namespace
}  // namespace tessera
