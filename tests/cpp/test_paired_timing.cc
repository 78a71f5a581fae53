// Paired timing (runtime/paired_timing.h), the one noise rule: scores are ratios to the
// reference, failures are reported per candidate, hopeless candidates stop early, finalists get
// more rounds, and a challenger wins only below the margin. Work is counted in spins, not
// timed against wall-clock expectations tighter than a factor of two.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <stdexcept>

#include "runtime/paired_timing.h"

namespace tessera::runtime {
namespace {

// Busy work proportional to n (the optimiser cannot drop it: the result is published).
std::atomic<uint64_t> sink{0};
void spin(int n) {
  uint64_t x = 1;
  for (int i = 0; i < n * 10000; ++i) x = x * 6364136223846793005ull + 1442695040888963407ull;
  sink.fetch_add(x);
}

PairedTimingOptions fast() {
  PairedTimingOptions o;
  o.rounds = 5;
  o.round_ms = 1;
  return o;
}

TEST(PairedTiming, RatiosFollowTheWork) {
  const PairedTiming t =
      time_paired([] { spin(20); }, {[] { spin(20); }, [] { spin(80); }}, fast());
  ASSERT_TRUE(t.reference_ok);
  ASSERT_EQ(t.ratio.size(), 2u);
  EXPECT_TRUE(t.ok[0] && t.ok[1]);
  EXPECT_GT(t.reference_ms, 0);
  EXPECT_LT(std::abs(t.ratio[0] - 1), 0.5) << t.ratio[0];
  EXPECT_GT(t.ratio[1], 2.0) << t.ratio[1];  // 4x the work
  EXPECT_DOUBLE_EQ(t.median_ms[1], t.ratio[1] * t.reference_ms);
  EXPECT_EQ(t.rounds[0], 5);
  // Each candidate round sits between two reference rounds, shared with its neighbours: one to
  // open, then one after each candidate round.
  EXPECT_EQ(t.reference_rounds, 1 + 5 * 2);
  EXPECT_GE(t.calls[0], 5);
}

TEST(PairedTiming, AThrowingCandidateIsReportedAndTheOthersStillScore) {
  const PairedTiming t = time_paired(
      [] { spin(5); }, {[] { throw std::runtime_error("boom"); }, [] { spin(5); }}, fast());
  ASSERT_TRUE(t.reference_ok);
  EXPECT_FALSE(t.ok[0]);
  EXPECT_EQ(t.error[0], "boom");
  EXPECT_TRUE(std::isinf(t.ratio[0]));
  EXPECT_TRUE(t.ok[1]);
  EXPECT_EQ(paired_winner(t, 2.0), 1);
}

TEST(PairedTiming, AThrowingReferenceFailsEveryCandidate) {
  const PairedTiming t =
      time_paired([] { throw std::runtime_error("no reference"); }, {[] { spin(1); }}, fast());
  EXPECT_FALSE(t.reference_ok);
  EXPECT_EQ(t.reference_error, "no reference");
  EXPECT_FALSE(t.ok[0]);
  EXPECT_EQ(paired_winner(t, 10.0), -1);
}

TEST(PairedTiming, HopelessCandidatesStopAfterOneRound) {
  PairedTimingOptions o = fast();
  o.drop_ratio = 1.5;
  const PairedTiming t = time_paired([] { spin(10); }, {[] { spin(100); }, [] { spin(10); }}, o);
  EXPECT_TRUE(t.dropped[0]);
  EXPECT_EQ(t.rounds[0], 1);
  EXPECT_FALSE(t.dropped[1]);
  EXPECT_EQ(t.rounds[1], 5);
  EXPECT_NE(paired_winner(t, 100.0), 0);  // never the dropped one, whatever the margin
}

TEST(PairedTiming, FinalistsGetMoreRounds) {
  PairedTimingOptions o = fast();
  o.rounds = 2;
  o.finalists = 1;
  o.final_rounds = 3;
  const PairedTiming t = time_paired([] { spin(10); }, {[] { spin(10); }, [] { spin(60); }}, o);
  EXPECT_EQ(t.rounds[0], 5);
  EXPECT_EQ(t.rounds[1], 2);
}

TEST(PairedTiming, TheWinnerMustBeatTheMargin) {
  PairedTiming t;
  t.reference_ok = true;
  t.ok = {true, true, true};
  t.dropped = {false, false, false};
  t.ratio = {0.99, 0.90, 0.95};
  EXPECT_EQ(paired_winner(t, 0.97), 1);
  t.ratio = {0.99, 0.98, 1.2};
  EXPECT_EQ(paired_winner(t, 0.97), -1);  // within the noise: the incumbent stays
}

}  // namespace
}  // namespace tessera::runtime
