// Construct mode end to end: every schedule Gensor (and the Roller baseline) returns lowers to a
// kernel that matches the reference interpreter; predict-only mode measures nothing; the
// candidate measurer rejects schedules that do not build. Small shapes and top-2 keep it fast.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "const_dims.h"
#include "e2e_harness.h"
#include "ops/ops.h"
#include "synthetic_hw.h"
#include "tune/common.h"
#include "tune/gensor/construct.h"
#include "tune/gensor/walk.h"

namespace tessera::tune::gensor {
namespace {

using ir::Expr;
using ir::Tensor;
using testing::Graph;

using testing::dims;
using testing::synthetic_hw;

ConstructOptions fast_options(ConstructMode mode, bool predict_only = false) {
  ConstructOptions o;
  o.mode = mode;
  o.top_k = 2;
  o.chains = 4;
  o.predict_only = predict_only;
  o.hardware = synthetic_hw();
  o.measure.timing.min_time_ms = 1;
  o.measure.timing.min_repeats = 1;
  o.measure.timing.max_repeats = 3;
  return o;
}

// Constructs with both modes and checks the chosen schedule and every measured candidate.
void check_construct(const Graph& g, const std::string& what) {
  for (ConstructMode mode : {ConstructMode::kGensor, ConstructMode::kRoller}) {
    SCOPED_TRACE(what + " / " + construct_mode_name(mode));
    Task task = Task::create(g.outputs, g.inputs, "t");
    ConstructResult r = construct(task, fast_options(mode));
    ASSERT_FALSE(r.candidates.empty());
    // The top 2, their local-padded variants where the vector axis has edge tiles, the top
    // one and its variant with the rules' annotations for the other stages, and the rules'
    // default schedule.
    EXPECT_LE(r.candidates.size(), 7u);
    EXPECT_FALSE(r.fell_back_to_default) << r.to_json().dump();
    EXPECT_TRUE(r.schedule.tuner == std::string("construct:") + construct_mode_name(mode) ||
                r.schedule.tuner == "default")
        << r.schedule.tuner;
    int defaults = 0;
    for (const ConstructCandidate& c : r.candidates) defaults += c.schedule.tuner == "default";
    EXPECT_LE(defaults, 1);
    ASSERT_GE(r.chosen, 0);
    // Every candidate was built and verified against the default schedule's output by the
    // measurer; the choice is the fastest of them.
    for (const ConstructCandidate& c : r.candidates) {
      EXPECT_TRUE(c.measured);
      EXPECT_TRUE(c.result.ok) << c.result.error;
      EXPECT_GT(c.predicted_ms, 0);
      EXPECT_LE(r.candidates[r.chosen].result.median_ms, c.result.median_ms);
    }
    EXPECT_EQ(r.schedule.dump(), r.candidates[r.chosen].schedule.dump());
    // Independently of the measurer: the returned schedule, after the JSON round trip the
    // records database stores, against the reference interpreter.
    testing::check_graph(g, schedule::KernelSchedule::parse(r.schedule.dump()), /*use_jit=*/true);
  }
}

TEST(GensorConstruct, LocalPaddedVariantCoversACutVectorAxis) {
  // A band of 65 along the vector axis: 4 full vectors and an edge tile of 1 lane under kSplit.
  Tensor a = ir::placeholder("A", dims({256, 32})), b = ir::placeholder("B", dims({32, 65}));
  schedule::StagePlan plan = schedule::plan_stages({ops::matmul(a, b)}, {a, b});
  const schedule::Target target;  // 16 lanes, 32 vector registers
  StageSpace sp = make_stage_space(plan, 0, target);
  AnalyticModel model(synthetic_hw(), ModelOptions{});
  schedule::StageAnnotation cut = sp.base;
  ASSERT_EQ(cut.vector_axis, 1);
  cut.tile_reg = {4, 32};
  cut.tile_outer = {64, 64};
  cut.edge = schedule::EdgeMode::kSplit;
  const auto v = local_padded_variant(sp, model, cut);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->edge, schedule::EdgeMode::kLocalPad);
  EXPECT_EQ(v->tile_reg, (std::vector<int64_t>{4, 80}));  // 4 x 5 vectors fit the file
  for (int x = 0; x < 2; ++x) EXPECT_EQ(v->tile_outer[x] % v->tile_reg[x], 0) << x;
  // A local-padded tile is one already; a register tile dividing the axis has no edge tiles.
  EXPECT_FALSE(local_padded_variant(sp, model, v.value()).has_value());
  schedule::StageAnnotation five = cut;
  five.tile_reg = {4, 65};
  EXPECT_FALSE(local_padded_variant(sp, model, five).has_value());
  // The variant computes the matmul.
  schedule::KernelSchedule ks = schedule::default_schedule(plan, target);
  ks.stages[0] = *v;
  testing::check_graph({{plan.outputs}, {a, b}}, ks, /*use_jit=*/true);
}

TEST(GensorConstruct, Matmul) {
  Tensor a = ir::placeholder("A", dims({70, 96})), b = ir::placeholder("B", dims({96, 50}));
  check_construct({{ops::matmul(a, b)}, {a, b}}, "matmul");
}

TEST(GensorConstruct, Conv2dWithPaddingStage) {
  // Two stages: the pad copy and the convolution (the main stage).
  Tensor x = ir::placeholder("X", dims({1, 8, 12, 12})),
         w = ir::placeholder("W", dims({16, 8, 3, 3}));
  Tensor y = ops::conv2d(x, w, nullptr, {1, 1}, {1, 1});
  ASSERT_EQ(schedule::plan_stages({y}, {x, w}).stages.size(), 2u);
  check_construct({{y}, {x, w}}, "conv2d");
}

TEST(GensorConstruct, StridedConvWithBiasAndDepthwise) {
  Tensor x = ir::placeholder("X", dims({1, 6, 15, 15})),
         w = ir::placeholder("W", dims({10, 6, 3, 3}));
  Tensor bias = ir::placeholder("bias", dims({10}));
  Tensor y = ops::relu(ops::conv2d(x, w, bias, {2, 2}, {1, 1}));
  check_construct({{y}, {x, w, bias}}, "strided conv + bias + relu");
  Tensor dx = ir::placeholder("DX", dims({1, 16, 14, 14})),
         dw = ir::placeholder("DW", dims({16, 1, 3, 3}));
  check_construct({{ops::conv2d(dx, dw, nullptr, {1, 1}, {1, 1}, {1, 1}, 16)}, {dx, dw}},
                  "depthwise");
}

TEST(GensorConstruct, BatchMatmul) {
  Tensor a = ir::placeholder("A", dims({3, 33, 24})), b = ir::placeholder("B", dims({3, 24, 40}));
  check_construct({{ops::batch_matmul(a, b)}, {a, b}}, "batch_matmul");
}

TEST(GensorConstruct, Pooling) {
  Tensor x = ir::placeholder("X", dims({2, 8, 18, 18}));
  check_construct({{ops::avg_pool2d(x, {2, 2})}, {x}}, "avg_pool2d");
  check_construct({{ops::max_pool2d(x, {3, 3}, {2, 2}, {1, 1})}, {x}}, "max_pool2d padded");
}

TEST(GensorConstruct, Gemv) {
  // y = W x as dense(x[1, K], W[N, K]): the cross-lane sketch.
  Tensor x = ir::placeholder("x", dims({1, 300})), w = ir::placeholder("W", dims({70, 300}));
  check_construct({{ops::dense(x, w)}, {x, w}}, "gemv");
  // And as a matmul with a single output column.
  Tensor a = ir::placeholder("A", dims({70, 300})), v = ir::placeholder("v", dims({300, 1}));
  check_construct({{ops::matmul(a, v)}, {a, v}}, "matvec");
}

TEST(GensorConstruct, StreamedVariantsRunTheWholeReductionAndLengthenTheSweep) {
  // 50 x 77 x 40 with 6 x 16 register tiles: edges on both spatial axes and on the reduction.
  Tensor a = ir::placeholder("A", dims({50, 40})), b = ir::placeholder("B", dims({40, 77}));
  Tensor c = ops::matmul(a, b);
  schedule::StagePlan plan = schedule::plan_stages({c}, {a, b});
  schedule::Target target;
  target.vector_lanes = 16;
  StageSpace sp = make_stage_space(plan, 0, target);
  schedule::StageAnnotation ann = sp.base;
  ann.tile_reg = {6, 16};
  ann.tile_outer = {12, 32};
  ann.tile_reduce = {16};
  ann.vector_axis = 1;
  ann.vector_width = 16;
  ann.s1_order = {1, 0};  // rows swept innermost
  const std::vector<schedule::StageAnnotation> vs = streamed_variants(sp, ann);
  // Rows 12, 24, 48, then capped at 54 (50 rounded up to whole register tiles).
  ASSERT_EQ(vs.size(), 4u);
  const std::vector<int64_t> rows = {12, 24, 48, 54};
  for (size_t i = 0; i < vs.size(); ++i) {
    SCOPED_TRACE(vs[i].to_json().dump());
    EXPECT_EQ(vs[i].tile_reduce, std::vector<int64_t>{40});
    EXPECT_EQ(vs[i].tile_outer, (std::vector<int64_t>{rows[i], 32}));
    EXPECT_EQ(vs[i].tile_reg, ann.tile_reg);
    EXPECT_EQ(vs[i].s1_order, ann.s1_order);
    EXPECT_EQ(vs[i].reduce_unroll, 4);  // 40 steps: the rules' unroll for long inner loops
    schedule::KernelSchedule ks;
    ks.stages = {vs[i]};
    testing::check_graph({{c}, {a, b}}, ks, /*use_jit=*/true);
  }
  // Columns swept innermost: the columns are lengthened instead.
  ann.s1_order = {0, 1};
  EXPECT_EQ(streamed_variants(sp, ann).back().tile_outer, (std::vector<int64_t>{12, 80}));
  // Nothing to stream when the reduce tile already covers the reduction.
  ann.tile_reduce = {40};
  EXPECT_TRUE(streamed_variants(sp, ann).empty());
}

TEST(GensorConstruct, RankedVariantsIncludeTheTilingWithoutTheRulesPacking) {
  // The rules pack B's panels (BERT's attention times values); for small operands the copy costs
  // more than it saves, so every visited tiling is also ranked unpacked (the model charges the
  // gathers where B is strided).
  Tensor a = ir::placeholder("A", dims({12, 128, 128}));
  Tensor b = ir::placeholder("B", dims({12, 128, 64}));
  Tensor c = ops::batch_matmul(a, b);
  schedule::StagePlan plan = schedule::plan_stages({c}, {a, b});
  schedule::Target target;
  target.vector_lanes = 16;
  StageSpace sp = make_stage_space(plan, 0, target);
  ASSERT_EQ(sp.base.pack, std::vector<std::string>{"B"});
  AnalyticModel model(synthetic_hw(), ModelOptions{});
  WalkOptions w;
  w.chains = 2;
  const std::vector<RankedAnnotation> ranked =
      rank_stage(sp, model, gensor_walk(sp, model, w).visited);
  std::map<std::string, int> packings;
  for (const RankedAnnotation& ra : ranked) {
    if (ra.annotation.vector_axis < 0) continue;  // scalar tilings pack nothing anyway
    std::string key;
    for (const std::string& name : ra.annotation.pack) key += name;
    ++packings[key];
  }
  EXPECT_GT(packings[""], 0);
  EXPECT_GT(packings["B"], 0);
  for (size_t i = 1; i < ranked.size(); ++i) {
    EXPECT_LE(ranked[i - 1].prediction.total_ms, ranked[i].prediction.total_ms);
  }
  // A convolution's weights are strided along the output channels the vector runs over:
  // unpacked they would be gathered, so they stay packed.
  Tensor x = ir::placeholder("X", dims({1, 64, 9, 9})),
         wt = ir::placeholder("W", dims({64, 64, 3, 3}));
  const schedule::StagePlan conv_plan =
      schedule::plan_stages({ops::conv2d(x, wt, nullptr, {1, 1}, {1, 1})}, {x, wt});
  const StageSpace conv =
      make_stage_space(conv_plan, static_cast<int>(conv_plan.stages.size()) - 1, target);
  ASSERT_EQ(conv.base.pack, std::vector<std::string>{"W"});
  int vectorised = 0;
  for (const RankedAnnotation& ra : rank_stage(conv, model, gensor_walk(conv, model, w).visited)) {
    if (ra.annotation.vector_axis < 0) continue;
    ++vectorised;
    EXPECT_EQ(ra.annotation.pack, std::vector<std::string>{"W"}) << ra.annotation.to_json().dump();
  }
  EXPECT_GT(vectorised, 0);
}

TEST(GensorConstruct, RulesRegisterTileVariantRoundsTheCacheTilesUp) {
  Tensor a = ir::placeholder("A", dims({50, 40})), b = ir::placeholder("B", dims({40, 77}));
  Tensor c = ops::matmul(a, b);
  schedule::Target target;
  target.vector_lanes = 16;
  StageSpace sp = make_stage_space(schedule::plan_stages({c}, {a, b}), 0, target);
  const std::vector<int64_t> rules = sp.base.tile_reg;
  ASSERT_EQ(rules.size(), 2u);
  schedule::StageAnnotation ann = sp.base;
  ann.tile_reg = {2, 16};
  ann.tile_outer = {10, 32};
  ann.tile_reduce = {8};
  ann.vector_width = 16;
  std::optional<schedule::StageAnnotation> v = with_rules_register_tile(sp, ann);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->tile_reg, rules);
  EXPECT_EQ(v->tile_reduce, ann.tile_reduce);
  EXPECT_EQ(v->s1_order, ann.s1_order);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(v->tile_outer[i] % rules[i], 0) << i;
    EXPECT_GE(v->tile_outer[i], std::min(ann.tile_outer[i], sp.extents[i]));
  }
  schedule::KernelSchedule ks;
  ks.stages = {*v};
  testing::check_graph({{c}, {a, b}}, ks, /*use_jit=*/true);
  EXPECT_FALSE(with_rules_register_tile(sp, *v).has_value());  // already the rules' tile
}

TEST(GensorConstruct, GrownRegisterTilesAddOneRowPerAxisWhileTheRegistersLast) {
  // A 3x3 conv over 32 channels: the rules vectorise the output channels (2 vectors) and block
  // 7 output columns; the variants grow the batch, row or column count by one.
  Tensor x = ir::placeholder("X", dims({2, 32, 14, 14})),
         w = ir::placeholder("W", dims({32, 32, 3, 3}));
  Tensor y = ops::conv2d(x, w, nullptr, {1, 1}, {1, 1});
  schedule::StagePlan plan = schedule::plan_stages({y}, {x, w});
  const int conv = static_cast<int>(plan.stages.size()) - 1;
  const schedule::Target target;  // 16 lanes, 32 vector registers
  StageSpace sp = make_stage_space(plan, conv, target);
  AnalyticModel model(synthetic_hw(), ModelOptions{});
  ASSERT_EQ(sp.base.vector_axis, 1);
  ASSERT_EQ(sp.base.tile_reg, (std::vector<int64_t>{1, 32, 1, 7}));
  const std::vector<schedule::StageAnnotation> grown =
      with_grown_register_tiles(sp, model, sp.base);
  std::set<std::vector<int64_t>> tiles;
  for (const schedule::StageAnnotation& g : grown) {
    tiles.insert(g.tile_reg);
    EXPECT_TRUE(model.register_tile_fits(sp, g.tile_reg));
    for (int a = 0; a < 4; ++a) EXPECT_EQ(g.tile_outer[a] % g.tile_reg[a], 0) << a;
  }
  EXPECT_EQ(tiles, (std::set<std::vector<int64_t>>{{2, 32, 1, 7}, {1, 32, 2, 7}, {1, 32, 1, 8}}));
  // 32 channels x 2 rows x 7 columns: 28 accumulators + 2 weight vectors + a broadcast fill the
  // file (31 of 32, one spare), so nothing grows from there.
  schedule::StageAnnotation two_rows = sp.base;
  two_rows.tile_reg = {1, 32, 2, 7};
  EXPECT_TRUE(with_grown_register_tiles(sp, model, two_rows).empty());
  // Each variant computes the conv.
  for (const schedule::StageAnnotation& g : grown) {
    schedule::KernelSchedule ks = schedule::default_schedule(plan, target);
    ks.stages[conv] = g;
    testing::check_graph({{y}, {x, w}}, ks, /*use_jit=*/true);
  }
}

TEST(GensorConstruct, PickDiverseCapsCacheTilingsAndRegisterTiles) {
  // Ranked best first: six tilings around one register tile, then two others.
  auto entry = [](int64_t outer, int64_t reg) {
    RankedAnnotation r;
    r.annotation.tile_outer = {outer, 64};
    r.annotation.tile_reduce = {128};
    r.annotation.tile_reg = {reg, 64};
    return r;
  };
  std::vector<RankedAnnotation> ranked;
  for (int64_t outer : {96, 96, 96, 192, 288, 384}) ranked.push_back(entry(outer, 6));
  ranked.push_back(entry(64, 4));
  ranked.push_back(entry(128, 8));
  // k = 4: two of the 6-row tile (the third 96 is one cache tiling too many, and half of k is
  // two), then the others in rank order.
  EXPECT_EQ(pick_diverse(ranked, 4), (std::vector<size_t>{0, 1, 6, 7}));
  // k = 8 takes everything; the caps only order the first pass.
  EXPECT_EQ(pick_diverse(ranked, 8).size(), 8u);
  // Too few others: the second pass fills up in rank order.
  ranked.resize(6);
  EXPECT_EQ(pick_diverse(ranked, 4), (std::vector<size_t>{0, 1, 2, 3}));
}

TEST(GensorConstruct, PredictOnlyMeasuresNothing) {
  Tensor a = ir::placeholder("A", dims({64, 64})), b = ir::placeholder("B", dims({64, 48}));
  Tensor c = ops::matmul(a, b);
  Task task = Task::create({c}, {a, b}, "t");
  ConstructResult r = construct(task, fast_options(ConstructMode::kGensor, /*predict_only=*/true));
  ASSERT_EQ(r.candidates.size(), 2u);
  EXPECT_EQ(r.chosen, 0);
  EXPECT_EQ(r.measure_s, 0.0);
  for (const ConstructCandidate& c : r.candidates) EXPECT_FALSE(c.measured);
  for (double m : r.measured_ms()) EXPECT_EQ(m, -1.0);
  EXPECT_LE(r.predicted_ms()[0], r.predicted_ms()[1]);
  EXPECT_EQ(r.schedule.dump(), r.candidates[0].schedule.dump());
  testing::check_graph({{c}, {a, b}}, r.schedule, true);
  // Same seed, same schedule; the metadata is complete.
  ConstructResult again = construct(task, fast_options(ConstructMode::kGensor, true));
  EXPECT_EQ(again.schedule.dump(), r.schedule.dump());
  util::Json j = r.to_json();
  EXPECT_EQ(j.at("mode").as_string(), "gensor");
  EXPECT_TRUE(j.at("predict_only").as_bool());
  EXPECT_GT(j.at("states_visited").as_int(), 0);
}

TEST(GensorConstruct, OnlyVerificationRunsLongerThanTheMinimumAbandonACandidate) {
  // A factor of ~0 marks every candidate as slow by its verification run; whether it is then
  // abandoned (its best single run kept as its time) depends on that run's length.
  Tensor a = ir::placeholder("A", dims({32, 40})), b = ir::placeholder("B", dims({40, 24}));
  Task task = Task::create({ops::matmul(a, b)}, {a, b}, "t");
  const std::vector<schedule::KernelSchedule> schedules(3, task.default_schedule());
  auto abandoned = [&](double min_ms) {
    MeasureConfig cfg;
    cfg.abandon_factor = 1e-9;
    cfg.abandon_min_ms = min_ms;
    cfg.round_ms = 0.1;
    int n = 0;
    for (const CandidateResult& r : CandidateMeasurer(task, cfg).measure_all(schedules)) {
      EXPECT_TRUE(r.ok) << r.error;
      n += r.abandoned;
      // Abandoned: the verification run and one warm run that confirmed it; else timed rounds.
      EXPECT_EQ(r.repeats == 2, r.abandoned) << r.repeats;
    }
    return n;
  };
  EXPECT_EQ(abandoned(50), 0);  // microsecond kernels: cold runs say nothing
  EXPECT_EQ(abandoned(0), 3);   // even the fastest is slower than ~0 times itself
}

// A 128x128 GEMM and two of its schedules that both run on the calling thread (waking pool
// workers costs this VM milliseconds at random, more than these kernels take): the default one,
// and a scalar one (1x1 register tiles, nothing vectorised or packed) several times slower.
struct FastAndScalar {
  Task task;
  schedule::KernelSchedule fast, slow;
};
FastAndScalar serial_fast_and_scalar_gemm() {
  Tensor a = ir::placeholder("A", dims({128, 128})), b = ir::placeholder("B", dims({128, 128}));
  FastAndScalar r{Task::create({ops::matmul(a, b)}, {a, b}, "t"), {}, {}};
  r.fast = r.task.default_schedule();
  r.fast.stages.back().parallel = false;
  r.slow = r.fast;
  schedule::StageAnnotation& st = r.slow.stages.back();
  st.tile_reg.assign(st.tile_reg.size(), 1);
  st.vector_axis = -1;
  st.vector_width = 1;
  st.pack.clear();
  st.reduce_unroll = 1;
  return r;
}

TEST(GensorConstruct, PairedTimingKeepsCandidatesInMillisecondsAndInOrder) {
  // Candidates are timed next to the first one and ranked by their ratios to it; their times stay
  // in milliseconds: two copies of one schedule come out alike, a scalar one far slower.
  const auto [task, fast, slow] = serial_fast_and_scalar_gemm();
  MeasureConfig cfg;
  cfg.round_ms = 2;
  cfg.rounds = 5;
  const std::vector<CandidateResult> r =
      CandidateMeasurer(task, cfg).measure_all({fast, fast, slow});
  ASSERT_EQ(r.size(), 3u);
  for (const CandidateResult& c : r) ASSERT_TRUE(c.ok) << c.error;
  EXPECT_GT(r[0].median_ms, 0);
  EXPECT_LT(std::abs(r[1].median_ms / r[0].median_ms - 1), 0.5)
      << r[0].median_ms << " vs " << r[1].median_ms;
  EXPECT_GT(r[2].median_ms, 1.5 * r[0].median_ms) << r[0].median_ms << " vs " << r[2].median_ms;
}

TEST(GensorConstruct, TheBestFewCandidatesGetMoreTimingRounds) {
  // Three copies of a fast schedule and two scalar ones: after the rounds every candidate gets,
  // the three fastest (the reference among them) race on, and the scalar ones stop.
  const auto [task, fast, slow] = serial_fast_and_scalar_gemm();
  MeasureConfig cfg;
  cfg.round_ms = 1;
  cfg.rounds = 3;
  cfg.finalists = 3;
  cfg.final_rounds = 4;
  const std::vector<CandidateResult> r =
      CandidateMeasurer(task, cfg).measure_all({fast, fast, fast, slow, slow});
  ASSERT_EQ(r.size(), 5u);
  for (const CandidateResult& c : r) ASSERT_TRUE(c.ok) << c.error;
  EXPECT_EQ(r[1].rounds, 7);
  EXPECT_EQ(r[2].rounds, 7);
  EXPECT_EQ(r[3].rounds, 3);
  EXPECT_EQ(r[4].rounds, 3);
  // Without the race every candidate gets the same rounds.
  cfg.finalists = 0;
  const std::vector<CandidateResult> plain =
      CandidateMeasurer(task, cfg).measure_all({fast, fast, fast, slow, slow});
  EXPECT_EQ(plain[1].rounds, 3);
  EXPECT_EQ(plain[4].rounds, 3);
}

TEST(GensorConstruct, MeasurerRejectsBrokenCandidates) {
  Tensor a = ir::placeholder("A", dims({32, 40})), b = ir::placeholder("B", dims({40, 24}));
  Task task = Task::create({ops::matmul(a, b)}, {a, b}, "t");
  MeasureConfig cfg;
  cfg.timing.min_time_ms = 1;
  CandidateMeasurer m(task, cfg);
  CandidateResult good = m.measure(task.default_schedule());
  EXPECT_TRUE(good.ok) << good.error;
  EXPECT_GT(good.median_ms, 0);
  schedule::KernelSchedule bad = task.default_schedule();
  bad.stages[0].tile_reg.push_back(1);  // one register tile too many
  CandidateResult r = m.measure(bad);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("build failed"), std::string::npos) << r.error;
  EXPECT_EQ(m.num_measured(), 2);
}

}  // namespace
}  // namespace tessera::tune::gensor
