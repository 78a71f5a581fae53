// Search mode's space: samples and mutants are valid (they pass the structural check and lower),
// a few of them built and run agree with the default schedule's output, every mutation operator
// applies and changes what it says, crossover mixes its parents, and the RNG makes it repeatable.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "const_dims.h"
#include "e2e_harness.h"
#include "ops/ops.h"
#include "tune/common.h"
#include "tune/search/space.h"

namespace tessera::tune::search {
namespace {

using ir::Tensor;
using schedule::KernelSchedule;
using schedule::Sketch;
using testing::dims;

struct Named {
  std::string name;
  testing::Graph graph;
};

// Small tasks covering the sketches: a GEMM (tiling and cross-lane both legal, two packable
// operands), a convolution behind its pad stage (two stages), a softmax (row reductions) and an
// elementwise op (no reduction).
std::vector<Named> small_graphs() {
  std::vector<Named> out;
  Tensor a = ir::placeholder("A", dims({40, 24})), b = ir::placeholder("B", dims({24, 36}));
  out.push_back({"matmul", {{ops::matmul(a, b)}, {a, b}}});
  Tensor x = ir::placeholder("X", dims({1, 4, 9, 9})), w = ir::placeholder("W", dims({8, 4, 3, 3}));
  out.push_back({"conv", {{ops::conv2d(x, w, nullptr, {1, 1}, {1, 1})}, {x, w}}});
  Tensor s = ir::placeholder("S", dims({6, 40}));
  out.push_back({"softmax", {{ops::softmax(s)}, {s}}});
  Tensor e = ir::placeholder("E", dims({12, 20}));
  out.push_back({"relu", {{ops::relu(e)}, {e}}});
  return out;
}

Task task_of(const Named& n) { return Task::create(n.graph.outputs, n.graph.inputs, n.name); }

MeasureConfig quick_measure() {
  MeasureConfig m;
  m.timing.min_time_ms = 0.1;
  m.timing.min_repeats = 1;
  m.timing.max_repeats = 1;
  m.rounds = 1;
  m.round_ms = 0.1;
  m.finalists = 0;
  return m;
}

TEST(SearchSpace, ChoicesComeFromTheStageSpace) {
  Tensor a = ir::placeholder("A", dims({40, 24})), b = ir::placeholder("B", dims({24, 36}));
  Task task = Task::create({ops::matmul(a, b)}, {a, b}, "mm");
  SearchSpace space(task);
  ASSERT_EQ(space.num_stages(), 1);
  const StageChoices& c = space.stage(0);
  EXPECT_EQ(c.vector_axis, c.space.vector_axis);
  EXPECT_EQ(c.vector_axis, 1);  // j
  // B is packed into vector panels, A into row panels; the reduction reads A's rows contiguously.
  EXPECT_EQ(std::set<std::string>(c.packable.begin(), c.packable.end()),
            (std::set<std::string>{"A", "B"}));
  EXPECT_TRUE(c.cross_lane_legal);
  // The relu has no reduction: no cross-lane sketch, nothing to pack.
  Tensor e = ir::placeholder("E", dims({12, 20}));
  Task t2 = Task::create({ops::relu(e)}, {e}, "relu");
  SearchSpace s2(t2);
  EXPECT_FALSE(s2.stage(0).cross_lane_legal);
  EXPECT_TRUE(s2.stage(0).packable.empty());
}

TEST(SearchSpace, SamplesAreValidDiverseAndRepeatable) {
  for (const Named& n : small_graphs()) {
    SCOPED_TRACE(n.name);
    Task task = task_of(n);
    SearchSpace space(task);
    std::mt19937_64 rng(5), again(5);
    std::set<std::string> keys;
    std::set<Sketch> sketches;
    for (int i = 0; i < 40; ++i) {
      KernelSchedule s = space.sample(rng);
      EXPECT_EQ(space.check_structure(s), "");
      std::string why;
      EXPECT_TRUE(space.try_lower(s, &why).has_value()) << why;
      keys.insert(schedule_key(s));
      for (const auto& st : s.stages) sketches.insert(st.sketch);
      EXPECT_EQ(schedule_key(space.sample(again)), schedule_key(s)) << "same seed, same samples";
    }
    EXPECT_GE(keys.size(), 30u) << "samples should rarely repeat";
    if (space.stage(space.num_stages() - 1).cross_lane_legal) {
      EXPECT_EQ(sketches.size(), 2u) << "both legal sketches are sampled";
    }
  }
}

TEST(SearchSpace, SamplesAndMutantsMatchTheDefaultSchedulesOutput) {
  // The measurer builds each schedule, runs it on random inputs and compares with the default
  // schedule's output; a wrong kernel comes back ok = false.
  for (const Named& n : small_graphs()) {
    SCOPED_TRACE(n.name);
    Task task = task_of(n);
    SearchSpace space(task);
    std::mt19937_64 rng(11);
    std::vector<KernelSchedule> cands;
    for (int i = 0; i < 3; ++i) cands.push_back(space.sample(rng));
    for (int i = 0; i < 3; ++i) {
      auto m = space.mutate(cands[i], rng);
      if (m) cands.push_back(*m);
    }
    CandidateMeasurer measurer(task, quick_measure());
    std::vector<CandidateResult> res = measurer.measure_all(cands);
    ASSERT_EQ(res.size(), cands.size());
    for (size_t i = 0; i < res.size(); ++i) {
      EXPECT_TRUE(res[i].ok) << res[i].error << "\n" << cands[i].dump();
    }
  }
  // And one sample against the double-precision reference interpreter.
  Tensor a = ir::placeholder("A", dims({40, 24})), b = ir::placeholder("B", dims({24, 36}));
  testing::Graph g({ops::matmul(a, b)}, {a, b});
  Task task = Task::create(g.outputs, g.inputs, "mm");
  SearchSpace space(task);
  std::mt19937_64 rng(3);
  testing::check_graph(g, space.sample(rng), /*use_jit=*/true);
}

TEST(SearchSpace, EveryMutationAppliesAndKeepsSchedulesValid) {
  Tensor a = ir::placeholder("A", dims({40, 24})), b = ir::placeholder("B", dims({24, 36}));
  Task task = Task::create({ops::matmul(a, b)}, {a, b}, "mm");
  SearchSpace space(task);
  std::mt19937_64 rng(21);
  for (int k = 0; k < kNumMutations; ++k) {
    const Mutation m = static_cast<Mutation>(k);
    SCOPED_TRACE(mutation_name(m));
    int applied = 0;
    for (int i = 0; i < 30; ++i) {
      KernelSchedule parent = space.sample(rng);
      auto child = space.mutate(parent, m, rng);
      if (!child) continue;
      ++applied;
      EXPECT_EQ(space.check_structure(*child), "");
      EXPECT_TRUE(space.try_lower(*child).has_value());
      const auto& p = parent.stages[0];
      const auto& c = child->stages[0];
      switch (m) {
        case Mutation::kTileSize:
          if (p.sketch == Sketch::kMultiLevelTiling) {
            // One axis changed; a spatial axis keeps its cache tile (a move among S1..S3) or
            // changes its count of cache tiles (a move to or from S0); test_mid_tiles.cc checks
            // that exactly two of the four levels change.
            const int64_t extents[] = {40, 36};
            int changed = 0;
            for (size_t ax = 0; ax < p.tile_outer.size(); ++ax) {
              if (p.tile_outer[ax] == c.tile_outer[ax] && p.mid_tiles()[ax] == c.mid_tiles()[ax] &&
                  p.tile_reg[ax] == c.tile_reg[ax])
                continue;
              ++changed;
              auto count = [&](int64_t t) { return (extents[ax] + t - 1) / t; };
              EXPECT_TRUE(p.tile_outer[ax] == c.tile_outer[ax] ||
                          count(p.tile_outer[ax]) != count(c.tile_outer[ax]));
            }
            changed += p.tile_reduce != c.tile_reduce;
            EXPECT_EQ(changed, 1);
          }
          break;
        case Mutation::kUnroll:
          EXPECT_TRUE(p.reduce_unroll != c.reduce_unroll || p.prefetch != c.prefetch);
          break;
        case Mutation::kParallel:
          EXPECT_TRUE(p.parallel != c.parallel || p.tile_outer != c.tile_outer);
          EXPECT_EQ(p.tile_reg, c.tile_reg);
          break;
        case Mutation::kVectorWidth:
          EXPECT_NE(p.vector_width, c.vector_width);
          break;
        case Mutation::kPack:
          EXPECT_NE(p.pack, c.pack);
          break;
        case Mutation::kOrder:
          EXPECT_NE(p.s1_loop_order(), c.s1_loop_order());
          break;
        case Mutation::kSketch:
          EXPECT_NE(p.sketch, c.sketch);
          break;
        case Mutation::kPlan:
          ADD_FAILURE() << "a matmul has one plan (test_plan_choices.cc tests kPlan)";
          break;
      }
    }
    if (m == Mutation::kPlan) continue;
    EXPECT_GE(applied, 5) << "the operator should apply to most matmul samples";
  }
}

TEST(SearchSpace, CrossoverTakesEachAxisFromAParent) {
  Tensor x = ir::placeholder("X", dims({1, 4, 9, 9})), w = ir::placeholder("W", dims({8, 4, 3, 3}));
  Task task = Task::create({ops::conv2d(x, w, nullptr, {1, 1}, {1, 1})}, {x, w}, "conv");
  SearchSpace space(task);
  std::mt19937_64 rng(8);
  int mixed = 0;
  for (int i = 0; i < 40; ++i) {
    // The pad op makes two plan variants; crossover mixes schedules of one.
    KernelSchedule a = space.sample(rng), b = space.sample(rng);
    while (b.plan != a.plan) b = space.sample(rng);
    auto c = space.crossover(a, b, rng);
    ASSERT_TRUE(c.has_value());
    EXPECT_EQ(space.check_structure(*c), "");
    EXPECT_TRUE(space.try_lower(*c).has_value());
    for (size_t s = 0; s < c->stages.size(); ++s) {
      const auto &cs = c->stages[s], &as = a.stages[s], &bs = b.stages[s];
      bool from_a = false, from_b = false;
      for (size_t ax = 0; ax < cs.tile_outer.size(); ++ax) {
        const bool in_a =
            cs.tile_outer[ax] == as.tile_outer[ax] && cs.tile_reg[ax] == as.tile_reg[ax];
        const bool in_b =
            cs.tile_outer[ax] == bs.tile_outer[ax] && cs.tile_reg[ax] == bs.tile_reg[ax];
        EXPECT_TRUE(in_a || in_b) << "axis " << ax << " comes from neither parent";
        from_a = from_a || (in_a && !in_b);
        from_b = from_b || (in_b && !in_a);
      }
      mixed += from_a && from_b;
    }
  }
  EXPECT_GT(mixed, 0) << "some children mix axes of both parents";
}

TEST(SearchSpace, StructuralCheckRejectsBrokenAnnotations) {
  Tensor a = ir::placeholder("A", dims({40, 24})), b = ir::placeholder("B", dims({24, 36}));
  Task task = Task::create({ops::matmul(a, b)}, {a, b}, "mm");
  SearchSpace space(task);
  std::mt19937_64 rng(2);
  KernelSchedule good;
  do {
    good = space.sample(rng);
  } while (good.stages[0].sketch != Sketch::kMultiLevelTiling);
  ASSERT_EQ(space.check_structure(good), "");
  KernelSchedule bad = good;
  bad.stages[0].tile_outer[0] = bad.stages[0].tile_reg[0] * 2 + 1;
  if (bad.stages[0].tile_reg[0] > 1) {
    EXPECT_NE(space.check_structure(bad), "");
  }
  bad = good;
  bad.stages[0].vector_width = 3;
  EXPECT_NE(space.check_structure(bad), "");
  bad = good;
  bad.stages[0].pack = {"C"};
  EXPECT_NE(space.check_structure(bad), "");
  bad = good;
  bad.stages[0].tile_reg = {16, 64};
  bad.stages[0].tile_outer = {16, 64};
  EXPECT_NE(space.check_structure(bad), "") << "1024 accumulators do not fit the registers";
  bad = good;
  bad.stages.push_back(good.stages[0]);
  EXPECT_NE(space.check_structure(bad), "");
  EXPECT_FALSE(space.try_lower(bad).has_value());
}

}  // namespace
}  // namespace tessera::tune::search
