// The task scheduler over synthetic latency curves (nothing is compiled): warm-up order,
// round-robin ablation, Ansor's gradient formula on hand-computed numbers, the gradient
// strategy's rounds going where the weighted latency can still drop (it reaches round-robin's
// final objective in at most 70% of the rounds), the random share, and tasks that never work.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "tune/search/task_scheduler.h"

namespace tessera::tune::search {
namespace {

// Best latency after t rounds: start, decaying towards floor with time constant tau (rounds).
struct Curve {
  double start, floor, tau;
  double at(int t) const { return floor + (start - floor) * std::exp(-(t - 1) / tau); }
};

struct Synthetic {
  std::vector<SchedulerTask> tasks;
  std::vector<Curve> curves;
  std::vector<int> tuned;
  TuneRound callback() {
    tuned.assign(tasks.size(), 0);
    return [this](int i) { return curves[i].at(++tuned[i]); };
  }
};

Synthetic four_tasks() {
  Synthetic s;
  s.tasks = {
      {"heavy", 10, 0, ""}, {"light", 1, 0, ""}, {"converged", 5, 0, ""}, {"slow_start", 3, 0, ""}};
  s.curves = {{10, 2, 6}, {10, 2, 6}, {3, 3, 1}, {20, 5, 10}};
  return s;
}

SchedulerOptions opts(Allocation a, int rounds, double eps = 0.05) {
  SchedulerOptions o;
  o.strategy = a;
  o.rounds = rounds;
  o.eps_random = eps;
  o.seed = 3;
  return o;
}

TEST(TaskScheduler, WarmUpThenRoundRobinAblation) {
  Synthetic s = four_tasks();
  SchedulerResult g = schedule_tasks(s.tasks, opts(Allocation::kGradient, 10), s.callback());
  ASSERT_EQ(g.order.size(), 10u);
  EXPECT_EQ(std::vector<int>(g.order.begin(), g.order.begin() + 4), (std::vector<int>{0, 1, 2, 3}));
  SchedulerResult rr = schedule_tasks(s.tasks, opts(Allocation::kRoundRobin, 10), s.callback());
  EXPECT_EQ(rr.order, (std::vector<int>{0, 1, 2, 3, 0, 1, 2, 3, 0, 1}));
  EXPECT_EQ(rr.rounds_per_task, (std::vector<int>{3, 3, 2, 2}));
  EXPECT_DOUBLE_EQ(rr.best_ms[2], 3);
  EXPECT_DOUBLE_EQ(rr.objective.back(),
                   10 * s.curves[0].at(3) + s.curves[1].at(3) + 5 * 3 + 3 * s.curves[3].at(2));
}

TEST(TaskScheduler, GradientMatchesAnsorsFormula) {
  SchedulerOptions o;  // alpha 0.2, beta 2, window 3
  const std::vector<double> h = {10, 8, 7, 6.5};
  // backward = (6.5 - 10) / 3, forward = -6.5 / 4.
  const double want = 2 * (0.2 * (-3.5 / 3) + 0.8 * (-6.5 / 4));
  EXPECT_NEAR(allocation_gradient(2, h, 0, 0, o), want, 1e-12);
  // A similar task runs 100 flops per ms: this one could reach 2 * 100 / 100 = 2 ms, 4.5 below.
  const double with_peer = 2 * (0.2 * (-3.5 / 3) + 0.8 * (2.0 - 6.5));
  EXPECT_NEAR(allocation_gradient(2, h, 100, 100, o), with_peer, 1e-12);
  // Right after warm-up there is no backward term.
  EXPECT_NEAR(allocation_gradient(1, {4}, 0, 0, o), 0.8 * -4.0, 1e-12);
}

// Eight kernels whose weighted latencies span two orders of magnitude (a CNN's mix): each
// search brings its latency from 3x down to its floor with a time constant of 5 rounds.
Synthetic eight_tasks() {
  Synthetic s;
  const double weight[] = {1, 2, 1, 4, 1, 2, 1, 3};
  const double floor_ms[] = {10, 5, 1, 0.5, 0.2, 2, 0.05, 0.1};
  for (int i = 0; i < 8; ++i) {
    s.tasks.push_back({"t" + std::to_string(i), weight[i], 0, ""});
    s.curves.push_back({3 * floor_ms[i], floor_ms[i], 5});
  }
  return s;
}

TEST(TaskScheduler, GradientReachesRoundRobinsResultInFewerRounds) {
  const int rounds = 64;
  Synthetic s = eight_tasks();
  SchedulerResult rr = schedule_tasks(s.tasks, opts(Allocation::kRoundRobin, rounds), s.callback());
  SchedulerResult g = schedule_tasks(s.tasks, opts(Allocation::kGradient, rounds), s.callback());
  const double target = rr.objective.back();
  int reached = -1;
  for (int r = 0; r < rounds && reached < 0; ++r) {
    if (g.objective[r] <= target) reached = r + 1;
  }
  ASSERT_GT(reached, 0) << "the gradient strategy never reached round-robin's final objective";
  EXPECT_LE(reached, 0.7 * rounds);
  EXPECT_LT(g.objective.back(), target);
  // The two 10 ms x weight tasks get the most rounds; the 0.05 ms one little beyond warm-up.
  EXPECT_GE(g.rounds_per_task[0] + g.rounds_per_task[1], 0.4 * rounds);
  EXPECT_LE(g.rounds_per_task[6], 4);
}

TEST(TaskScheduler, RandomShareAndRepeatability) {
  Synthetic s = four_tasks();
  SchedulerResult all_random =
      schedule_tasks(s.tasks, opts(Allocation::kGradient, 404, 1.0), s.callback());
  for (int n : all_random.rounds_per_task) {
    EXPECT_GT(n, 60);
    EXPECT_LT(n, 140);
  }
  SchedulerResult a = schedule_tasks(s.tasks, opts(Allocation::kGradient, 60), s.callback());
  SchedulerResult b = schedule_tasks(s.tasks, opts(Allocation::kGradient, 60), s.callback());
  EXPECT_EQ(a.order, b.order);
  SchedulerOptions greedy = opts(Allocation::kGradient, 60, 0.0);
  SchedulerResult c = schedule_tasks(s.tasks, greedy, s.callback());
  greedy.seed = 99;
  SchedulerResult d = schedule_tasks(s.tasks, greedy, s.callback());
  EXPECT_EQ(c.order, d.order) << "without the random share the seed does not matter";
}

TEST(TaskScheduler, ATaskThatNeverWorksDoesNotTakeEveryRound) {
  Synthetic s = four_tasks();
  s.curves[1] = {std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity(),
                 1};
  SchedulerResult g = schedule_tasks(s.tasks, opts(Allocation::kGradient, 30, 0.0), s.callback());
  EXPECT_EQ(g.rounds_per_task[1], 2) << "warm-up and one retry";
  EXPECT_TRUE(std::isinf(g.objective.back()));
  EXPECT_EQ(g.order.size(), 30u);
}

}  // namespace
}  // namespace tessera::tune::search
