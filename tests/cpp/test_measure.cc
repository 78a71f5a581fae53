// Tests for the measurement harness (repeat logic, verification gate, error handling, statistics)
// and for allclose. No timing asserts: runs are counted, and the only time-based check relies on a
// lower bound that sleep() guarantees.

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <thread>
#include <vector>

#include "runtime/measure.h"
#include "runtime/verify.h"

namespace tessera::runtime {
namespace {

TEST(Measure, ZeroMinTimeTakesExactlyMinRepeatsPlusWarmup) {
  int calls = 0;
  MeasureOptions opt;
  opt.warmup = 2;
  opt.min_repeats = 5;
  opt.min_time_ms = 0;
  MeasureResult r = measure([&] { ++calls; }, opt);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.repeats, 5);
  EXPECT_EQ(r.samples_ms.size(), 5u);
  EXPECT_EQ(calls, 7);
  for (double s : r.samples_ms) EXPECT_GE(s, 0.0);
  EXPECT_LE(r.min_ms, r.median_ms);
  EXPECT_LE(r.median_ms, r.max_ms);
}

TEST(Measure, MaxRepeatsCapsAnUnreachableMinTime) {
  int calls = 0;
  MeasureOptions opt;
  opt.warmup = 0;
  opt.min_repeats = 3;
  opt.max_repeats = 17;
  opt.min_time_ms = 1e9;  // never reached by a counter increment
  MeasureResult r = measure([&] { ++calls; }, opt);
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.repeats, 17);
  EXPECT_EQ(calls, 17);
}

TEST(Measure, MaxRepeatsWinsOverMinRepeats) {
  int calls = 0;
  MeasureOptions opt;
  opt.warmup = 0;
  opt.min_repeats = 50;
  opt.max_repeats = 4;
  opt.min_time_ms = 0;
  MeasureResult r = measure([&] { ++calls; }, opt);
  EXPECT_EQ(r.repeats, 4);
  EXPECT_EQ(calls, 4);
}

TEST(Measure, KeepsSamplingUntilMinTimeIsReached) {
  // Each call sleeps >= 1 ms, so the samples reach 5 ms after at most 5 of them; fewer than
  // min_repeats is impossible. Both bounds hold however slow the machine is.
  MeasureOptions opt;
  opt.warmup = 0;
  opt.min_repeats = 2;
  opt.min_time_ms = 5;
  MeasureResult r = measure([] { std::this_thread::sleep_for(std::chrono::milliseconds(1)); }, opt);
  ASSERT_TRUE(r.ok);
  EXPECT_GE(r.repeats, 2);
  EXPECT_LE(r.repeats, 5);
  double total = 0;
  for (double s : r.samples_ms) {
    EXPECT_GE(s, 1.0);
    total += s;
  }
  EXPECT_GE(total, 5.0);
  EXPECT_GE(r.min_ms, 1.0);
}

TEST(Measure, CacheFlushDoesNotChangeTheCallCount) {
  int calls = 0;
  MeasureOptions opt;
  opt.warmup = 1;
  opt.min_repeats = 3;
  opt.min_time_ms = 0;
  opt.flush_cache = true;
  opt.flush_bytes = 1 << 20;
  MeasureResult r = measure([&] { ++calls; }, opt);
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.repeats, 3);
  EXPECT_EQ(calls, 4);
}

TEST(Measure, ExceptionFromRunIsReported) {
  int calls = 0;
  MeasureOptions opt;
  opt.warmup = 0;
  opt.min_time_ms = 0;
  MeasureResult r = measure(
      [&] {
        if (++calls == 2) throw std::runtime_error("kernel exploded");
      },
      opt);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("kernel exploded"), std::string::npos) << r.error;
  EXPECT_EQ(r.repeats, 0);
  EXPECT_TRUE(r.samples_ms.empty());
}

TEST(MeasureVerified, FailedVerificationRunsOnceAndTimesNothing) {
  int calls = 0, verifies = 0;
  MeasureOptions opt;
  opt.warmup = 3;
  opt.min_repeats = 5;
  MeasureResult r = measure_verified([&] { ++calls; },
                                     [&](std::string* why) {
                                       ++verifies;
                                       *why = "element 7 differs";
                                       return false;
                                     },
                                     opt);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(verifies, 1);
  EXPECT_EQ(r.repeats, 0);
  EXPECT_TRUE(r.samples_ms.empty());
  EXPECT_EQ(r.median_ms, 0.0);
  EXPECT_NE(r.error.find("verification failed"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("element 7 differs"), std::string::npos) << r.error;
}

TEST(MeasureVerified, PassingVerificationCountsAsFirstWarmup) {
  int calls = 0, verifies = 0, calls_at_verify = -1;
  MeasureOptions opt;
  opt.warmup = 2;
  opt.min_repeats = 4;
  opt.min_time_ms = 0;
  MeasureResult r = measure_verified([&] { ++calls; },
                                     [&](std::string*) {
                                       ++verifies;
                                       calls_at_verify = calls;
                                       return true;
                                     },
                                     opt);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(verifies, 1);
  EXPECT_EQ(calls_at_verify, 1);  // verify sees the output of exactly one run
  EXPECT_EQ(r.repeats, 4);
  EXPECT_EQ(calls, 1 + 1 + 4);  // verification run + remaining warm-up + samples
}

TEST(MeasureVerified, ExceptionFromVerifyIsReported) {
  MeasureOptions opt;
  opt.min_time_ms = 0;
  MeasureResult r = measure_verified(
      [] {}, [](std::string*) -> bool { throw std::runtime_error("reference crashed"); }, opt);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("reference crashed"), std::string::npos) << r.error;
}

TEST(SummarizeSamples, StatisticsMatchHandComputedValues) {
  MeasureResult odd = summarize_samples({5, 1, 3});
  EXPECT_EQ(odd.repeats, 3);
  EXPECT_DOUBLE_EQ(odd.median_ms, 3);
  EXPECT_DOUBLE_EQ(odd.mean_ms, 3);
  EXPECT_DOUBLE_EQ(odd.min_ms, 1);
  EXPECT_DOUBLE_EQ(odd.max_ms, 5);
  EXPECT_DOUBLE_EQ(odd.stddev_ms, 2);                         // sample stddev of {1,3,5}
  EXPECT_EQ(odd.samples_ms, (std::vector<double>{5, 1, 3}));  // original order kept

  MeasureResult even = summarize_samples({4, 1, 10, 2});
  EXPECT_DOUBLE_EQ(even.median_ms, 3);
  EXPECT_DOUBLE_EQ(even.mean_ms, 4.25);

  MeasureResult one = summarize_samples({7});
  EXPECT_DOUBLE_EQ(one.median_ms, 7);
  EXPECT_DOUBLE_EQ(one.stddev_ms, 0);

  MeasureResult none = summarize_samples({});
  EXPECT_EQ(none.repeats, 0);
  EXPECT_EQ(none.median_ms, 0);
}

// ---------------------------------------------------------------------------------------------
// allclose
// ---------------------------------------------------------------------------------------------

TEST(Allclose, IdenticalArraysMatch) {
  std::vector<float> a = {0, 1, -2.5f, 1e30f, -1e-30f};
  CompareResult r = allclose(a.data(), a.data(), static_cast<int64_t>(a.size()));
  EXPECT_TRUE(r.ok) << r.message;
  EXPECT_EQ(r.mismatches, 0);
  EXPECT_EQ(r.max_abs_err, 0);
  EXPECT_EQ(r.max_rel_err, 0);
}

TEST(Allclose, ToleranceBoundaryFollowsNumpyFormula) {
  // |got - want| <= atol + rtol * |want| with rtol = 1e-3, atol = 0: want = 1000 allows 1.0.
  std::vector<double> want = {1000.0, 1000.0};
  std::vector<float> got = {1000.75f, 1001.5f};
  CompareResult r = allclose(got.data(), want.data(), 2, 1e-3, 0.0);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.mismatches, 1);
  EXPECT_EQ(r.worst_index, 1);
  EXPECT_DOUBLE_EQ(r.max_abs_err, 1.5);
  EXPECT_DOUBLE_EQ(r.max_rel_err, 1.5e-3);
  EXPECT_NE(r.message.find("index 1"), std::string::npos) << r.message;

  // atol covers values near zero, where rtol alone would demand exactness.
  std::vector<float> w0 = {0.0f}, g0 = {5e-6f};
  EXPECT_TRUE(allclose(g0.data(), w0.data(), 1, 1e-4, 1e-5).ok);
  EXPECT_FALSE(allclose(g0.data(), w0.data(), 1, 1e-4, 1e-6).ok);
}

TEST(Allclose, WorstIndexIsTheMostOutOfTolerance) {
  // Index 0: error 0.5 on 1e6 (well inside rtol); index 2: error 0.01 on 0.1 (far outside).
  std::vector<float> want = {1e6f, 1.0f, 0.1f};
  std::vector<float> got = {1e6f + 0.5f, 1.0f, 0.11f};
  CompareResult r = allclose(got.data(), want.data(), 3);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.mismatches, 1);
  EXPECT_EQ(r.worst_index, 2);
  EXPECT_DOUBLE_EQ(r.max_abs_err, 0.5);
}

TEST(Allclose, NanAndInfinityHandling) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  {
    std::vector<float> got = {nan, inf, -inf}, want = {nan, inf, -inf};
    EXPECT_TRUE(allclose(got.data(), want.data(), 3).ok);
  }
  {
    std::vector<float> got = {1.0f, nan}, want = {1.0f, 2.0f};
    CompareResult r = allclose(got.data(), want.data(), 2);
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.worst_index, 1);
    EXPECT_EQ(r.mismatches, 1);
  }
  {
    std::vector<float> got = {2.0f}, want = {nan};  // number where the reference has NaN
    EXPECT_FALSE(allclose(got.data(), want.data(), 1).ok);
  }
  {
    std::vector<float> got = {inf, 1e38f}, want = {-inf, inf};
    CompareResult r = allclose(got.data(), want.data(), 2);
    EXPECT_EQ(r.mismatches, 2);
  }
}

TEST(Allclose, DoubleReferenceCatchesFloatRoundingOnlyBeyondTolerance) {
  const int64_t n = 1000;
  std::vector<double> want(n);
  std::vector<float> got(n);
  for (int64_t i = 0; i < n; ++i) {
    want[i] = std::sin(0.01 * static_cast<double>(i)) * 100.0;
    got[i] = static_cast<float>(want[i]);  // float rounding: relative error <= 6e-8
  }
  EXPECT_TRUE(allclose(got.data(), want.data(), n).ok);
  got[n - 1] += 1.0f;
  CompareResult r = allclose(got.data(), want.data(), n);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.worst_index, n - 1);
}

TEST(Allclose, EmptyInputIsOk) {
  CompareResult r =
      allclose(static_cast<const float*>(nullptr), static_cast<const float*>(nullptr), 0);
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(r.worst_index, -1);
}

TEST(Allclose, DoubleVersusDouble) {
  std::vector<double> a = {1.0, 2.0}, b = {1.0, 2.0 + 1e-3};
  EXPECT_FALSE(allclose(a.data(), b.data(), 2).ok);
  EXPECT_TRUE(allclose(a.data(), b.data(), 2, 1e-3, 0).ok);
}

}  // namespace
}  // namespace tessera::runtime
