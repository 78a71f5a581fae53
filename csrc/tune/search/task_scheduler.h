#pragma once
// Allocation of tuning rounds across the tasks of a whole model (Ansor's task scheduler).
//
// The objective is the model's latency f = sum_i w_i g_i, with w_i the task's weight (how often
// its kernel runs per forward pass) and g_i its best latency so far. After a warm-up round for
// every task, each round goes to the task with the most negative estimate of df/dt_i (t_i = the
// task's rounds so far; Ansor, Sec. 6):
//   df/dt_i ~ w_i * ( alpha * backward_i + (1 - alpha) * forward_i )
//   backward_i = (g_i(t_i) - g_i(t_i - dt)) / dt          dt = min(backward_window, t_i - 1)
//   forward_i  = min( -g_i(t_i) / t_i,                    (the 1/t improvement a search shows)
//                     beta * C_i / V_i - g_i(t_i) )       (as fast as its fastest similar task)
// with C_i the task's work (flops) and V_i the best throughput C_k / g_k among the other tasks of
// its similarity group (the second term is left out when there are none or C_i is unknown).
// With probability eps_random a round goes to a random task instead. A task that still has no
// valid result after two rounds of its own is left to the random share (it would otherwise take
// every round). Round-robin is the ablation.
//
// Pure logic over a callback: nothing here compiles or measures.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tessera::tune::search {

struct SchedulerTask {
  std::string name;
  double weight = 1;  // occurrences of the kernel per run of the model
  double flops = 0;   // work of one run (0: unknown; disables the similar-task term)
  std::string group;  // tasks of one group count as similar ("": none)
};

enum class Allocation { kGradient, kRoundRobin };
const char* allocation_name(Allocation a);

struct SchedulerOptions {
  Allocation strategy = Allocation::kGradient;
  int rounds = 0;            // rounds in all (one callback call each)
  double alpha = 0.2;        // Ansor's weight of the backward gradient
  double beta = 2.0;         // Ansor's optimism factor towards similar tasks' throughput
  int backward_window = 3;   // Ansor's dt, in rounds
  double eps_random = 0.05;  // share of rounds that go to a random task (Ansor's eps-greedy)
  uint64_t seed = 0;
};

// Tunes task `i` for one more round; returns its best latency so far in ms (+infinity while it
// has no valid candidate).
using TuneRound = std::function<double(int task)>;

struct SchedulerResult {
  std::vector<int> order;  // the task of each round
  std::vector<int> rounds_per_task;
  std::vector<double> best_ms;    // per task, at the end
  std::vector<double> objective;  // sum_i w_i g_i after each round (+inf while some g_i is)
};

SchedulerResult schedule_tasks(const std::vector<SchedulerTask>& tasks,
                               const SchedulerOptions& options, const TuneRound& tune_round);

// df/dt_i from the formula above. `history[k]` = the task's best latency after its round k+1
// (so t_i = history.size() >= 1); `peer_throughput` = max C_k / g_k over its similar tasks, 0 when
// none.
double allocation_gradient(double weight, const std::vector<double>& history, double flops,
                           double peer_throughput, const SchedulerOptions& options);

}  // namespace tessera::tune::search
