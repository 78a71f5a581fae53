#pragma once
// Where search candidates are measured. A Runner opens a TaskRunner per task; the TaskRunner
// builds each candidate, verifies its outputs against the task's default schedule (a mismatch
// rejects it; its time never counts) and times the survivors, exactly as CandidateMeasurer does.
// Runners differ in where that happens:
//   in-process  CandidateMeasurer in this process: fastest, keeps the built kernels, but a
//               candidate that crashes or hangs takes the process with it (construct mode's
//               few, rule-derived candidates are measured this way);
//   workers     forked worker processes (tune/worker_runner.h): a crash, hang or runaway
//               allocation fails the candidate, not the process; the default for search;
//   ray         a Ray cluster (Python side, tessera/runners/).
// Invariant: a TaskRunner never throws for a bad candidate (the result says ok = false and why);
// it throws only when the task itself cannot be measured (the reference does not build).
#include <memory>
#include <string>
#include <vector>

#include "tune/common.h"

namespace tessera::tune {

class TaskRunner {
 public:
  virtual ~TaskRunner() = default;
  // One result per schedule, in order. Results carry their kernel only when the candidate was
  // built in this process; otherwise the caller builds the winner again.
  virtual std::vector<CandidateResult> measure(
      const std::vector<schedule::KernelSchedule>& schedules) = 0;
  // A search's final race among schedules measured before: as measure(), timed with
  // final_race_config's longer rounds where the runner owns its timing (runners written in
  // Python time as they always do).
  virtual std::vector<CandidateResult> measure_final_race(
      const std::vector<schedule::KernelSchedule>& schedules) {
    return measure(schedules);
  }
};

class Runner {
 public:
  virtual ~Runner() = default;
  virtual std::string name() const = 0;
  // `task` outlives the returned TaskRunner.
  virtual std::unique_ptr<TaskRunner> open(const Task& task) = 0;
};

// Measures in this process with a CandidateMeasurer per task.
std::shared_ptr<Runner> in_process_runner(MeasureConfig config = {});

// The runner called `name` with its default options: "workers" | "in-process". Throws
// tessera::Error for other names.
std::shared_ptr<Runner> runner_named(const std::string& name);

}  // namespace tessera::tune
