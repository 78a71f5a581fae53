// Joint layout and loop tuning (layout/layout_tuner.h): the two stages share one budget, the
// chosen kernel computes the original values in its layouts, the choice is stored with its
// layouts and replayed from the records database without measuring.
#include <gtest/gtest.h>

#include "const_dims.h"
#include "db/records.h"
#include "db/schedule_names.h"
#include "db/workload_key.h"
#include "layout/layout_tuner.h"
#include "layout_check.h"
#include "ops/ops.h"
#include "schedule/tuning_policy.h"
#include "util/counters.h"

namespace tessera::layout {
namespace {

using ir::Tensor;
using testing::dims;

testing::LayoutCase conv_case() {
  Tensor x = ir::placeholder("X", dims({1, 16, 12, 12})),
         w = ir::placeholder("W", dims({32, 16, 3, 3}));
  return {{ops::relu(ops::conv2d(x, w, nullptr, {1, 1}, {1, 1}), "Y")}, {x, w}, {}};
}

void expect_result_correct(const testing::LayoutCase& c, const LayoutTuneResult& r) {
  testing::LayoutCase chosen = c;
  chosen.layouts = r.chosen.layouts;
  const testing::RelaidData d = testing::relaid_data(chosen, r.relaid);
  testing::expect_kernel_matches(*r.kernel.kernel, r.relaid.outputs, d);
}

TEST(LayoutTuner, TunesEveryCandidateThenSpendsTheRestOnTheBest) {
  const testing::LayoutCase c = conv_case();
  const std::vector<LayoutCandidate> cands = layout_candidates(c.outputs, 16);
  LayoutTuneOptions o;
  o.budget = 10;
  o.per_layout = 2;
  const LayoutTuneResult r = tune_layouts(c.outputs, c.inputs, cands, o);
  ASSERT_EQ(r.trials.size(), cands.size());
  for (const LayoutTrial& t : r.trials) {
    EXPECT_TRUE(t.error.empty()) << t.candidate.name << ": " << t.error;
    EXPECT_GT(t.best_ms, 0) << t.candidate.name;
    EXPECT_GE(t.measured, 1);
    EXPECT_LE(t.measured, o.per_layout);
  }
  EXPECT_GT(r.layout_stage_measured, 0);
  EXPECT_GT(r.loop_stage_measured, 0);  // the rest of the ranking, not measured before
  EXPECT_LE(r.layout_stage_measured + r.loop_stage_measured, o.budget);
  // The race: the layout stage's fastest layouts, the fastest first as the incumbent (ratio 1).
  std::vector<const LayoutTrial*> by_time;
  for (const LayoutTrial& t : r.trials) by_time.push_back(&t);
  std::sort(by_time.begin(), by_time.end(),
            [](const LayoutTrial* a, const LayoutTrial* b) { return a->best_ms < b->best_ms; });
  ASSERT_GE(r.race.size(), 2u);
  ASSERT_LE(r.race.size(), 3u);
  for (size_t i = 0; i < r.race.size(); ++i) {
    EXPECT_EQ(r.race[i].candidate, by_time[i]->candidate.name) << i;
    EXPECT_GT(r.race[i].ratio, 0) << i;
  }
  EXPECT_EQ(r.race[0].ratio, 1.0);
  // The chosen layout is the race's: a challenger only by the win margin, else the incumbent.
  size_t fastest = 0;
  for (size_t i = 1; i < r.race.size(); ++i) {
    if (r.race[i].ratio < r.race[fastest].ratio) fastest = i;
  }
  const bool challenger_wins =
      fastest > 0 && r.race[fastest].ratio < schedule::tuning_policy().win_margin;
  EXPECT_EQ(r.chosen.name, r.race[challenger_wins ? fastest : 0].candidate);
  // The loop stage times the layout stage's best again beside its new candidates, so the result
  // has a time from that batch (not necessarily below the layout stage's).
  EXPECT_GT(r.best_ms, 0);
  EXPECT_EQ(r.schedule.tuner, "alt:" + r.chosen.name);
  EXPECT_EQ(r.schedule.layouts.size(), propagate_layouts(c.outputs, r.chosen.layouts).size());
  expect_result_correct(c, r);
}

TEST(LayoutTuner, ChoiceIsStoredWithItsLayoutsAndReplayedWithoutMeasuring) {
  const testing::LayoutCase c = conv_case();
  db::RecordsDB records = db::RecordsDB::open(":memory:");
  LayoutTuneOptions o;
  o.budget = 6;
  o.per_layout = 1;
  o.records = &records;
  // Only blocked layouts: the stored choice must carry layouts to replay.
  std::vector<LayoutCandidate> cands;
  for (const LayoutCandidate& cand : layout_candidates(c.outputs, 16)) {
    if (cand.name == "NCHW16c") cands.push_back(cand);
  }
  ASSERT_EQ(cands.size(), 1u);
  const LayoutTuneResult first = tune_layouts(c.outputs, c.inputs, cands, o);
  EXPECT_FALSE(first.from_records);
  const int64_t measured_before = util::read(util::Counter::kCandidates);
  const LayoutTuneResult again = tune_layouts(c.outputs, c.inputs, cands, o);
  EXPECT_TRUE(again.from_records);
  EXPECT_EQ(util::read(util::Counter::kCandidates), measured_before);
  EXPECT_EQ(again.chosen.name, "NCHW16c");
  EXPECT_EQ(again.schedule.layouts, first.schedule.layouts);
  EXPECT_EQ(again.schedule.stages_text(), first.schedule.stages_text());
  expect_result_correct(c, again);
  // The same operator in fixed layouts has its own records: ALT's do not answer for it.
  EXPECT_FALSE(records.best(db::make_workload_key(c.outputs, c.inputs)).has_value());
}

TEST(LayoutTuner, LoopsOnlyInFixedLayoutsUsesTheWholeBudget) {
  const testing::LayoutCase c = conv_case();
  LayoutTuneOptions o;
  o.budget = 5;
  const LayoutTuneResult r = tune_loops_only(c.outputs, c.inputs, {"fixed", {}}, o);
  EXPECT_EQ(r.layout_stage_measured, 0);
  EXPECT_GE(r.loop_stage_measured, 2);
  EXPECT_LE(r.loop_stage_measured, o.budget);
  EXPECT_TRUE(r.schedule.layouts.empty());
  expect_result_correct(c, r);
}

TEST(LayoutTuner, TheMeasuredWinnerIsHandedOutWithoutAnotherJit) {
  const testing::LayoutCase c = conv_case();
  LayoutTuneOptions o;
  o.budget = 4;
  const int64_t jit_before = util::read(util::Counter::kJitCompiles);
  const LayoutTuneResult r = tune_loops_only(c.outputs, c.inputs, {"fixed", {}}, o);
  const int64_t jits = util::read(util::Counter::kJitCompiles) - jit_before;
  // One JIT per measured candidate (the rules' schedule is the verification reference, built
  // once), none for the kernel handed out.
  EXPECT_EQ(jits, r.loop_stage_measured);
  expect_result_correct(c, r);
}

TEST(LayoutTuner, ScheduleLayoutsRoundTripThroughJsonAndCanonicalNames) {
  const testing::LayoutCase c = conv_case();
  schedule::KernelSchedule s;
  s.layouts = {{"X", "split(1,16) reorder(0,1,3,4,2)"}, {"Y", "reorder(0,2,3,1)"}};
  const schedule::KernelSchedule back = schedule::KernelSchedule::parse(s.dump());
  EXPECT_EQ(back.layouts, s.layouts);
  EXPECT_EQ(back.stages_text(), s.stages_text());  // layouts are not part of the stages' text
  const db::WorkloadKey key = db::make_workload_key(c.outputs, c.inputs);
  const std::string canonical = db::schedule_to_canonical(key, s.dump());
  EXPECT_EQ(canonical.find("\"X\""), std::string::npos) << canonical;  // names translated
  EXPECT_EQ(schedule::KernelSchedule::parse(db::schedule_from_canonical(key, canonical)).layouts,
            s.layouts);
}

}  // namespace
}  // namespace tessera::layout
