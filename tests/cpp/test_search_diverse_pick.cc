// Diversity-aware picks (tune/search/diverse_pick.h): knobs name every schedule choice once, the
// greedy pick prefers the candidate adding the most uncovered knob values and the better-ranked on
// ties, and a search round with a pool measures more distinct choices than the best-ranked alone.
#include <gtest/gtest.h>

#include <set>

#include "const_dims.h"
#include "ops/ops.h"
#include "synthetic_hw.h"
#include "tune/search/diverse_pick.h"
#include "tune/search/evolution.h"

namespace tessera::tune::search {
namespace {

using schedule::KernelSchedule;

Task gemm_task() {
  ir::Tensor a = ir::placeholder("A", testing::dims({64, 48}));
  ir::Tensor b = ir::placeholder("B", testing::dims({48, 64}));
  return Task::create({ops::matmul(a, b)}, {a, b}, "gemm");
}

TEST(DiversePick, TakesTheCandidateAddingTheMostUncoveredValues) {
  const std::vector<std::vector<std::string>> knobs = {
      {"t=1", "u=1", "p=0"},  // best-ranked
      {"t=1", "u=1", "p=1"},  // one value new after the first
      {"t=2", "u=2", "p=0"},  // two values new after the first
      {"t=2", "u=1", "p=1"},  // nothing new after the other three
  };
  EXPECT_EQ(pick_for_coverage(knobs, 1), (std::vector<size_t>{0}));
  EXPECT_EQ(pick_for_coverage(knobs, 2), (std::vector<size_t>{0, 2}));
  EXPECT_EQ(pick_for_coverage(knobs, 3), (std::vector<size_t>{0, 2, 1}));
  EXPECT_EQ(pick_for_coverage(knobs, 10), (std::vector<size_t>{0, 2, 1, 3}));
  EXPECT_TRUE(pick_for_coverage(knobs, 0).empty());
  EXPECT_TRUE(pick_for_coverage({}, 4).empty());
}

TEST(DiversePick, BreaksTiesByRank) {
  const std::vector<std::vector<std::string>> knobs = {{"a=1"}, {"a=2"}, {"a=3"}, {"a=2"}};
  EXPECT_EQ(pick_for_coverage(knobs, 4), (std::vector<size_t>{0, 1, 2, 3}));
}

TEST(DiversePick, KnobsNameEachChoiceOnce) {
  const Task task = gemm_task();
  KernelSchedule s = task.default_schedule();
  s.stages[0].prefetch = false;
  const std::vector<std::string> knobs = schedule_knobs(s);
  const std::set<std::string> distinct(knobs.begin(), knobs.end());
  EXPECT_EQ(distinct.size(), knobs.size());
  // A tile vector is one knob, named by its stage.
  int tile_reg = 0;
  for (const std::string& k : knobs) tile_reg += k.rfind("0/tile_reg=", 0) == 0;
  EXPECT_EQ(tile_reg, 1);
  // Two schedules that differ in one choice differ in exactly one knob, whichever of them leaves
  // it at its default (which JSON omits); the tuner is no knob.
  for (bool prefetch : {false, true}) {
    KernelSchedule t = s;
    s.stages[0].prefetch = prefetch;
    t.stages[0].prefetch = !prefetch;
    t.tuner = "search";
    const std::vector<std::vector<std::string>> both = knobs_of({s, t});
    ASSERT_EQ(both[0].size(), both[1].size());
    std::set<std::string> only_in_t(both[1].begin(), both[1].end());
    for (const std::string& k : both[0]) only_in_t.erase(k);
    ASSERT_EQ(only_in_t.size(), 1u);
    EXPECT_EQ(*only_in_t.begin(), prefetch ? "0/prefetch=-" : "0/prefetch=true");
  }
}

// Knob values covered by the schedules a search measured in its round `round`.
size_t covered_in_round(const SearchResult& r, int round) {
  std::set<std::string> covered;
  for (const Trial& t : r.trials) {
    if (t.round != round || t.picked_by == "random") continue;
    for (const std::string& k : schedule_knobs(t.schedule)) covered.insert(k);
  }
  return covered.size();
}

TEST(DiversePick, ARoundWithAPoolMeasuresMoreDistinctChoices) {
  // One analytic round (no model yet): both searches evolve the same population with the same
  // random draws (how many candidates evolution returns draws nothing); one measures the best 30,
  // the other picks 30 of the best 60 for coverage.
  const Task task = gemm_task();
  SearchOptions o;
  o.trials = 32;
  o.per_round = 32;
  o.evolution.population = 128;
  o.evolution.generations = 2;
  o.hardware = testing::synthetic_hw();
  o.seed = 3;
  const Measure measure = [](const std::vector<KernelSchedule>& batch) {
    std::vector<CandidateResult> out(batch.size());
    for (CandidateResult& r : out) {
      r.ok = true;
      r.median_ms = 1;
    }
    return out;
  };
  cost::RandomModel unused;
  o.diversity_pool = 1;
  const SearchResult best_alone = search_task(task, o, measure, unused);
  o.diversity_pool = 2;
  const SearchResult pooled = search_task(task, o, measure, unused);
  ASSERT_EQ(best_alone.trials.size(), 32u);
  ASSERT_EQ(pooled.trials.size(), 32u);
  EXPECT_GT(covered_in_round(pooled, 0), covered_in_round(best_alone, 0));
}

}  // namespace
}  // namespace tessera::tune::search
