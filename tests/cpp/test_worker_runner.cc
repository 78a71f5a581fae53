// The worker-process runner (tune/worker_runner.h): results agree with the in-process runner,
// and a candidate that segfaults, aborts, hangs or allocates without end fails alone, with its
// error, while this process survives and no worker is left behind.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstdlib>
#include <random>

#include "const_dims.h"
#include "ops/ops.h"
#include "tune/search/space.h"
#include "tune/worker_runner.h"
#include "util/check.h"

namespace tessera::tune {
namespace {

using schedule::KernelSchedule;
using testing::dims;

struct GemmTask {
  ir::Tensor a = ir::placeholder("A", dims({64, 48}));
  ir::Tensor b = ir::placeholder("B", dims({48, 80}));
  ir::Tensor c = ops::matmul(a, b);
  Task task = Task::create({c}, {a, b}, "worker_gemm");
};

// Short timing: these tests check what fails and why, not which candidate is fastest.
MeasureConfig quick_measure() {
  MeasureConfig m;
  m.rounds = 2;
  m.round_ms = 1;
  m.timing_budget_ms = 100;
  m.finalists = 0;
  return m;
}

// The rules' schedule and random valid ones from the search space: five candidates.
std::vector<KernelSchedule> candidates(const Task& task) {
  search::SearchSpace space(task);
  std::mt19937_64 rng(7);
  std::vector<KernelSchedule> out{task.default_schedule()};
  while (out.size() < 5) out.push_back(space.sample(rng));
  return out;
}

WorkerRunnerOptions options_with(InjectedFault fault) {
  WorkerRunnerOptions o;
  o.measure = quick_measure();
  o.fault = std::move(fault);
  return o;
}

InjectedFault fault_at(InjectedFault::Kind kind, int candidate) {
  InjectedFault f;
  f.kind = kind;
  f.candidate = candidate;
  return f;
}

// No child of this process is left running or unreaped.
void expect_no_children() {
  errno = 0;
  const pid_t r = ::waitpid(-1, nullptr, WNOHANG);
  EXPECT_TRUE(r == 0 || (r == -1 && errno == ECHILD)) << "waitpid(-1) returned " << r;
  EXPECT_NE(r, 0) << "a worker is still running";
}

std::vector<CandidateResult> measure_with(const std::shared_ptr<Runner>& runner, const Task& task,
                                          const std::vector<KernelSchedule>& schedules) {
  std::unique_ptr<TaskRunner> task_runner = runner->open(task);
  return task_runner->measure(schedules);
}

TEST(WorkerRunner, AgreesWithTheInProcessRunner) {
  GemmTask g;
  std::vector<KernelSchedule> schedules = candidates(g.task);
  KernelSchedule broken = schedules[1];
  broken.stages.clear();  // does not fit the kernel: a build failure in both runners
  schedules.push_back(broken);
  const auto in_process = measure_with(in_process_runner(quick_measure()), g.task, schedules);
  const auto workers = measure_with(worker_runner(options_with({})), g.task, schedules);
  ASSERT_EQ(workers.size(), schedules.size());
  for (size_t i = 0; i < schedules.size(); ++i) {
    SCOPED_TRACE("candidate " + std::to_string(i));
    EXPECT_EQ(workers[i].ok, in_process[i].ok) << workers[i].error;
    EXPECT_EQ(workers[i].kernel, nullptr);  // built in another process
    if (workers[i].ok) {
      EXPECT_GT(workers[i].median_ms, 0);
      EXPECT_GT(workers[i].repeats, 0);
    }
  }
  EXPECT_FALSE(workers.back().ok);
  EXPECT_NE(workers.back().error.find("build failed"), std::string::npos) << workers.back().error;
  expect_no_children();
}

struct FaultCase {
  InjectedFault::Kind kind;
  const char* error;  // what the failed candidate's error says
};

class WorkerRunnerFault : public ::testing::TestWithParam<FaultCase> {};

TEST_P(WorkerRunnerFault, FailsExactlyThatCandidate) {
  GemmTask g;
  const std::vector<KernelSchedule> schedules = candidates(g.task);
  constexpr int kFaulty = 2;
  WorkerRunnerOptions o = options_with(fault_at(GetParam().kind, kFaulty));
  if (GetParam().kind == InjectedFault::Kind::kHang) o.timeout_s = 4;
  o.memory_budget_mb = 1024;  // the runaway allocation fails at about 1 GiB
  const auto results = measure_with(worker_runner(o), g.task, schedules);
  ASSERT_EQ(results.size(), schedules.size());
  for (size_t i = 0; i < results.size(); ++i) {
    SCOPED_TRACE("candidate " + std::to_string(i));
    if (static_cast<int>(i) == kFaulty) {
      EXPECT_FALSE(results[i].ok);
      EXPECT_NE(results[i].error.find(GetParam().error), std::string::npos) << results[i].error;
    } else {
      EXPECT_TRUE(results[i].ok) << results[i].error;
      EXPECT_GT(results[i].median_ms, 0);
    }
  }
  expect_no_children();
}

INSTANTIATE_TEST_SUITE_P(
    Faults, WorkerRunnerFault,
    ::testing::Values(FaultCase{InjectedFault::Kind::kSegfault,
                                "worker crashed with SIGSEGV while running candidate"},
                      FaultCase{InjectedFault::Kind::kAbort,
                                "worker crashed with SIGABRT while running candidate"},
                      FaultCase{InjectedFault::Kind::kHang,
                                "worker timed out after 4 s while running candidate"},
                      FaultCase{InjectedFault::Kind::kOutOfMemory, "out of memory"}),
    [](const ::testing::TestParamInfo<FaultCase>& info) {
      switch (info.param.kind) {
        case InjectedFault::Kind::kSegfault:
          return std::string("Segfault");
        case InjectedFault::Kind::kAbort:
          return std::string("Abort");
        case InjectedFault::Kind::kHang:
          return std::string("Hang");
        case InjectedFault::Kind::kOutOfMemory:
          return std::string("OutOfMemory");
        default:
          return std::string("None");
      }
    });

TEST(WorkerRunner, FaultsByStagesTextAndEveryBatch) {
  GemmTask g;
  const std::vector<KernelSchedule> schedules = candidates(g.task);
  InjectedFault f;
  f.kind = InjectedFault::Kind::kSegfault;
  f.stages_contains = schedules[3].stages_text();
  std::unique_ptr<TaskRunner> runner = worker_runner(options_with(f))->open(g.task);
  for (int batch = 0; batch < 2; ++batch) {  // one task runner, two batches: a worker each
    const auto results = runner->measure(schedules);
    for (size_t i = 0; i < results.size(); ++i) {
      const bool faulty = schedules[i].stages_text() == f.stages_contains;
      EXPECT_EQ(results[i].ok, !faulty) << i << ": " << results[i].error;
    }
  }
  expect_no_children();
}

TEST(WorkerRunner, PinsABuildCrashOnItsCandidateWhenSeveralBuildAtOnce) {
  GemmTask g;
  const std::vector<KernelSchedule> schedules = candidates(g.task);
  WorkerRunnerOptions o = options_with(InjectedFault::parse("segfault:2@build"));
  o.measure.build_threads = 4;  // several candidates in flight when the crash comes
  const auto results = measure_with(worker_runner(o), g.task, schedules);
  for (size_t i = 0; i < results.size(); ++i) {
    EXPECT_EQ(results[i].ok, i != 2) << i << ": " << results[i].error;
  }
  EXPECT_NE(results[2].error.find("worker crashed with SIGSEGV while building candidate"),
            std::string::npos)
      << results[2].error;
  expect_no_children();
}

TEST(WorkerRunner, RetriesATimingCrashOnceThenFailsTheSurvivors) {
  GemmTask g;
  const std::vector<KernelSchedule> schedules = candidates(g.task);
  // Strikes in every worker that times candidate 1: the retry crashes too.
  const auto always = measure_with(
      worker_runner(options_with(InjectedFault::parse("abort:1@timing"))), g.task, schedules);
  for (const CandidateResult& r : always) {
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.error.find("worker crashed with SIGABRT while timing candidates (twice)"),
              std::string::npos)
        << r.error;
  }
  expect_no_children();
}

TEST(WorkerRunner, ReadsTheFaultFromTheEnvironmentInTheWorker) {
  GemmTask g;
  const std::vector<KernelSchedule> schedules = candidates(g.task);
  ::setenv("TESSERA_FAULT_INJECT", "abort:4", 1);
  const auto results = measure_with(worker_runner(options_with({})), g.task, schedules);
  ::setenv("TESSERA_FAULT_INJECT", "bogus:1", 1);
  const auto malformed = measure_with(worker_runner(options_with({})), g.task, schedules);
  ::unsetenv("TESSERA_FAULT_INJECT");
  for (size_t i = 0; i < results.size(); ++i) EXPECT_EQ(results[i].ok, i != 4) << results[i].error;
  EXPECT_NE(results[4].error.find("SIGABRT"), std::string::npos) << results[4].error;
  for (const CandidateResult& r : malformed) {
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.error.find("unknown fault 'bogus'"), std::string::npos) << r.error;
  }
  expect_no_children();
}

TEST(WorkerRunner, ParsesFaultSpecs) {
  const InjectedFault a = InjectedFault::parse("segfault:3");
  EXPECT_EQ(a.kind, InjectedFault::Kind::kSegfault);
  EXPECT_EQ(a.candidate, 3);
  const InjectedFault b = InjectedFault::parse("oom:stages=\"tile_reg\"");
  EXPECT_EQ(b.kind, InjectedFault::Kind::kOutOfMemory);
  EXPECT_EQ(b.candidate, -1);
  EXPECT_EQ(b.stages_contains, "\"tile_reg\"");
  EXPECT_EQ(b.phase, InjectedFault::Phase::kRun);
  const InjectedFault c = InjectedFault::parse("hang:0@timing");
  EXPECT_EQ(c.phase, InjectedFault::Phase::kTiming);
  EXPECT_EQ(c.candidate, 0);
  EXPECT_THROW(InjectedFault::parse("hang:0@later"), Error);
  EXPECT_FALSE(InjectedFault::parse("").any());
  EXPECT_THROW(InjectedFault::parse("hang"), Error);
  EXPECT_THROW(InjectedFault::parse("hang:x"), Error);
  EXPECT_THROW(InjectedFault::parse("hang:-1"), Error);
  EXPECT_THROW(InjectedFault::parse("melt:1"), Error);
}

// A search's final race (TaskRunner::measure_final_race) times every candidate in each of its
// longer rounds, in a worker as in this process; a search round gives the extra rounds to its
// finalists only.
TEST(WorkerRunner, TimesTheFinalRaceInLongerRoundsForEveryCandidate) {
  GemmTask g;
  const std::vector<KernelSchedule> schedules = candidates(g.task);
  MeasureConfig m = quick_measure();
  m.timing_budget_ms = 1000;
  m.finalists = 2;
  m.final_rounds = 2;
  const MeasureConfig race = final_race_config(m);
  EXPECT_EQ(race.rounds, kFinalRaceRounds);
  EXPECT_DOUBLE_EQ(race.round_ms, m.round_ms * kFinalRaceRoundFactor);
  EXPECT_EQ(race.finalists, 0);
  WorkerRunnerOptions o;
  o.measure = m;
  for (const std::shared_ptr<Runner>& runner : {worker_runner(o), in_process_runner(m)}) {
    SCOPED_TRACE(runner->name());
    std::unique_ptr<TaskRunner> task_runner = runner->open(g.task);
    const std::vector<CandidateResult> searched = task_runner->measure(schedules);
    const std::vector<CandidateResult> raced = task_runner->measure_final_race(schedules);
    ASSERT_EQ(raced.size(), schedules.size());
    int short_in_search = 0;
    for (size_t i = 0; i < schedules.size(); ++i) {
      ASSERT_TRUE(searched[i].ok && raced[i].ok) << searched[i].error << raced[i].error;
      // The first survivor is every round's reference: it runs beside each candidate.
      if (i > 0) {
        EXPECT_EQ(raced[i].rounds, kFinalRaceRounds) << "candidate " << i;
      }
      short_in_search += searched[i].rounds < m.rounds + m.final_rounds;
    }
    EXPECT_GT(short_in_search, 0) << "every candidate of a search round was a finalist";
  }
  expect_no_children();
}

TEST(WorkerRunner, IsTheDefaultRunnerByName) {
  EXPECT_EQ(runner_named("workers")->name(), "workers");
  EXPECT_EQ(runner_named("in-process")->name(), "in-process");
  EXPECT_THROW(runner_named("ray"), Error);
}

}  // namespace
}  // namespace tessera::tune
