#include "tune/search/task_scheduler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "util/check.h"

namespace tessera::tune::search {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// Rounds of its own after which a task without any valid result leaves the gradient choice.
constexpr int kRoundsBeforeGivingUp = 2;

double objective(const std::vector<SchedulerTask>& tasks, const std::vector<double>& best) {
  double f = 0;
  for (size_t i = 0; i < tasks.size(); ++i) f += tasks[i].weight * best[i];
  return f;
}

}  // namespace

const char* allocation_name(Allocation a) {
  switch (a) {
    case Allocation::kGradient:
      return "gradient";
    case Allocation::kRoundRobin:
      return "round_robin";
  }
  return "?";
}

double allocation_gradient(double weight, const std::vector<double>& history, double flops,
                           double peer_throughput, const SchedulerOptions& options) {
  TESSERA_CHECK(!history.empty()) << "a task's gradient needs at least its warm-up round";
  const int t = static_cast<int>(history.size());
  const double g = history.back();
  const int dt = std::min(options.backward_window, t - 1);
  const double backward = dt > 0 ? (g - history[t - 1 - dt]) / dt : 0.0;
  double forward = -g / t;
  if (flops > 0 && peer_throughput > 0) {
    forward = std::min(forward, options.beta * flops / peer_throughput - g);
  }
  return weight * (options.alpha * backward + (1 - options.alpha) * forward);
}

SchedulerResult schedule_tasks(const std::vector<SchedulerTask>& tasks,
                               const SchedulerOptions& options, const TuneRound& tune_round) {
  const int n = static_cast<int>(tasks.size());
  TESSERA_CHECK(n > 0) << "no tasks to schedule";
  std::mt19937_64 rng(options.seed * 0x9e3779b97f4a7c15ull + 0x7a5c);
  SchedulerResult res;
  res.rounds_per_task.assign(n, 0);
  res.best_ms.assign(n, kInf);
  std::vector<std::vector<double>> history(n);

  auto run = [&](int i) {
    const double g = tune_round(i);
    res.best_ms[i] = std::min(res.best_ms[i], g);  // best-so-far never gets worse
    history[i].push_back(res.best_ms[i]);
    ++res.rounds_per_task[i];
    res.order.push_back(i);
    res.objective.push_back(objective(tasks, res.best_ms));
  };

  for (int r = 0; r < options.rounds; ++r) {
    if (options.strategy == Allocation::kRoundRobin || r < n) {
      run(r % n);  // round-robin; for the gradient strategy the warm-up round of each task
      continue;
    }
    if (std::uniform_real_distribution<double>(0, 1)(rng) < options.eps_random) {
      run(std::uniform_int_distribution<int>(0, n - 1)(rng));
      continue;
    }
    int pick = -1;
    double best_grad = kInf;
    for (int i = 0; i < n; ++i) {
      if (!std::isfinite(res.best_ms[i])) {
        if (res.rounds_per_task[i] < kRoundsBeforeGivingUp) {  // one more try first
          pick = i;
          break;
        }
        continue;
      }
      double peer = 0;
      if (!tasks[i].group.empty()) {
        for (int k = 0; k < n; ++k) {
          if (k == i || tasks[k].group != tasks[i].group || tasks[k].flops <= 0) continue;
          if (std::isfinite(res.best_ms[k]) && res.best_ms[k] > 0)
            peer = std::max(peer, tasks[k].flops / res.best_ms[k]);
        }
      }
      const double grad =
          allocation_gradient(tasks[i].weight, history[i], tasks[i].flops, peer, options);
      if (grad < best_grad) {
        best_grad = grad;
        pick = i;
      }
    }
    if (pick < 0) pick = std::uniform_int_distribution<int>(0, n - 1)(rng);  // all given up
    run(pick);
  }
  return res;
}

}  // namespace tessera::tune::search
