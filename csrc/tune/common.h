#pragma once
// Interfaces shared by the tuners (construct, search, reuse, dynamic): the Task they tune and
// the measurement of candidate schedules.
//
// Measuring a candidate = build the kernel with its schedule, run it once on fixed random
// inputs and compare every output with the default-schedule kernel's output (numerically; a
// mismatch rejects the candidate and its time never counts), then time it with
// runtime::measure. The reference is built and run once per measurer.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "compiler/build.h"
#include "ir/tensor.h"
#include "runtime/measure.h"
#include "runtime/ndarray.h"
#include "schedule/annotation.h"
#include "schedule/default_schedule.h"
#include "schedule/stage_plan.h"

namespace tessera::tune {

// Symbolic extents are planned and measured as if they were this large unless a value is given.
inline constexpr int64_t kSymbolicSizeGuess = 256;

// One kernel to tune: its compute DAG, stage plan and target.
struct Task {
  std::string name = "task";
  std::vector<ir::Tensor> outputs;
  std::vector<ir::Tensor> inputs;
  schedule::StagePlan plan;
  schedule::Target target;
  // false: every candidate runs on the calling thread alone (the kernel will; see
  // schedule::TuningPolicy::serial_bytes), so candidates are measured as they will run.
  bool parallel = true;
  // Values of symbolic sizes used when measuring (missing ones: kSymbolicSizeGuess).
  std::map<const ir::ExprNode*, int64_t> sizes;
  // Names of inputs whose values are the same on every call (weights): a schedule that packs
  // one builds a kernel reading it prepacked (schedule/prepack.h), and candidates are measured
  // that way, packed once before they run, as the compiled kernel will run.
  std::vector<std::string> constant_inputs;

  // Plans the DAG (one stage plan per task).
  static Task create(const std::vector<ir::Tensor>& outputs, const std::vector<ir::Tensor>& inputs,
                     const std::string& name = "task");
  // A task over a plan made already.
  static Task from_plan(schedule::StagePlan plan, const std::string& name = "task");

  // The stage plan a schedule with `choices` builds: `plan` for plan's own choices, else
  // planned from outputs/inputs on first use and kept in plan_cache (thread-safe; a cached plan
  // lives as long as the task or a copy of it).
  const schedule::StagePlan& plan_for(const schedule::PlanChoices& choices) const;

  // Iteration points over all stages (spatial x reduce extents): a size measure for reports.
  double iteration_points() const;
  // Floating-point work of one run: a multiply-add (2 flops) per summation point; 0 for a kernel
  // without summation (its GFLOP/s is not meaningful).
  double flops() const;
  // The schedule the tuners start from and are compared with (serial when `parallel` is off).
  schedule::KernelSchedule default_schedule() const;
  // `s` as this task runs it: every stage serial when `parallel` is off.
  schedule::KernelSchedule as_run(schedule::KernelSchedule s) const;
  // The constant inputs `s` reads prepacked (schedule::prepackable_inputs on its plan).
  std::vector<std::string> prepacked_inputs(const schedule::KernelSchedule& s) const;
  // The same, or none when `s` does not fit the task's plans (a stored schedule from another
  // version: building it reports that).
  std::vector<std::string> prepacked_inputs_or_none(const schedule::KernelSchedule& s) const;
  // Builds `s` over its plan (plan_for), reading prepacked_inputs(s) prepacked.
  compiler::BuiltKernel build(const schedule::KernelSchedule& s, const std::string& name) const;

  // Plans of other choices than plan's (plan_for), shared by copies of the task: a copy given
  // another DAG needs a fresh cache.
  struct PlanCache {
    std::mutex mutex;
    std::map<std::string, std::unique_ptr<const schedule::StagePlan>> plans;  // by choices.text()
  };
  std::shared_ptr<PlanCache> plan_cache = std::make_shared<PlanCache>();
};

struct MeasureConfig {
  // measure(): runtime::measure options for one candidate on its own.
  runtime::MeasureOptions timing = [] {
    runtime::MeasureOptions o;
    o.warmup = 1;  // the verification run is the warm-up
    o.min_repeats = 3;
    o.min_time_ms = 30;
    o.max_repeats = 50;
    return o;
  }();
  // measure_all(): after every candidate was built and verified, the survivors are timed by
  // runtime::time_paired (the one noise rule) against the first survivor (the model's
  // favourite): `rounds` rounds of about round_ms each.
  int rounds = 3;
  double round_ms = 5;
  // Rounds after the first stop once the timing rounds used this much time in all (slow kernels
  // get fewer rounds; construct mode is meant to take seconds). Enough for all three rounds of
  // eight 50 ms candidates (GEMM 2048), each timed next to the reference: with 600 ms they got
  // two single runs, and one burst of background load decided between tilings 10% apart.
  double timing_budget_ms = 2500;
  // Then the `finalists` best by ratio get final_rounds more rounds (within final_budget_ms),
  // when there are more candidates than that; 0 turns the race off.
  int finalists = 3;
  int final_rounds = 4;
  double final_budget_ms = 1500;
  // A candidate whose verification run is slower than this factor times the fastest
  // verification run, and than abandon_min_ms, and whose warm second run confirms it, is not
  // timed further (its best single run is its time). 0 disables.
  double abandon_factor = 2.0;
  // A cold run of a short kernel says little: only runs longer than this can abandon.
  double abandon_min_ms = 50;
  // Verification tolerance: |got - want| <= atol + rtol * |want| with
  // atol = atol_rel * (1 + max |want|) (summation order differs between schedules).
  double rtol = 1e-3;
  double atol_rel = 1e-4;
  uint64_t seed = 17;  // random inputs
  // Threads building (lowering + JIT-compiling) candidates before any is timed; 0: as many as
  // the kernels run on.
  int build_threads = 0;
};

// Rounds of a search's final race (SearchSession::decide), every finalist in every one.
inline constexpr int kFinalRaceRounds = 7;
// A final-race round is this many times as long as a search round.
inline constexpr double kFinalRaceRoundFactor = 4;

// The settings a search's final race times its few finalists and the rules' schedule with: the
// search's own, with every candidate timed in kFinalRaceRounds rounds kFinalRaceRoundFactor
// times as long (one short burst of background load must not choose between kernels a few
// percent apart, nor choose a kernel slower than the rules' schedule).
MeasureConfig final_race_config(const MeasureConfig& search);

// The buffers a kernel runs on in a measurer: its inputs (a prepacked input's packed copy in its
// place, packed once when the kernel was verified), then its outputs.
struct KernelArgs {
  std::vector<runtime::NDArray> packed;
  std::vector<void*> ptrs;
};

// Runs job(0) .. job(n - 1) on up to `threads` threads (the caller's included), each job once,
// and returns when all have returned. For lowering and JIT compiles, which are independent per
// candidate (each has its own LLVM context); jobs must not throw.
void run_jobs(size_t n, size_t threads, const std::function<void(size_t)>& job);

struct CandidateResult {
  bool ok = false;
  std::string error;     // why not ok: build failure, numerical mismatch, run error
  double median_ms = 0;  // timing median (or the single verification run when abandoned)
  bool abandoned = false;
  double build_ms = 0;  // lower + JIT (0 when the kernel was built already: the reference)
  int repeats = 0;
  int rounds = 0;  // timing rounds in measure_all (the race gives the best few more)
  // The verified kernel (null when not ok), kept so the chosen candidate is never built again.
  std::shared_ptr<const compiler::BuiltKernel> kernel;
  // Its buffers when it reads prepacked inputs (null: the measurer's plain ones).
  std::shared_ptr<const KernelArgs> args;
};

// Hears the steps of CandidateMeasurer::measure_all as they happen: the worker runner reports
// them to its parent process, which pins a crash on the candidate in flight. Indices are into
// measure_all's `schedules`. build_started/built are called on the building threads
// (concurrently; a candidate whose schedule is the reference's is not built and gets neither);
// the others on the measuring thread, in order. An exception from build_started fails that
// candidate's build, one from run_started its run.
class MeasureObserver {
 public:
  virtual ~MeasureObserver() = default;
  virtual void build_started(size_t /*candidate*/) {}
  virtual void built(size_t /*candidate*/, const CandidateResult& /*result*/) {}
  // Right before the candidate's verification run (its first run).
  virtual void run_started(size_t /*candidate*/) {}
  virtual void verified(size_t /*candidate*/, const CandidateResult& /*result*/) {}
  // Every candidate was verified; the survivors' timing (runs of any survivor) begins.
  virtual void timing_started() {}
};

class CandidateMeasurer {
 public:
  explicit CandidateMeasurer(const Task& task, MeasureConfig config = {});
  ~CandidateMeasurer();
  CandidateMeasurer(const CandidateMeasurer&) = delete;
  CandidateMeasurer& operator=(const CandidateMeasurer&) = delete;

  // Builds, verifies and times one candidate. Never throws for a bad candidate (ok = false). A
  // candidate whose schedule is the reference's (the task's default schedule) reuses the
  // reference kernel instead of being built again.
  CandidateResult measure(const schedule::KernelSchedule& schedule);
  // Builds and verifies every candidate, then times the survivors interleaved (see MeasureConfig).
  // `observer` (not owned; null: none) hears each step as it happens. `timing` (null: the
  // measurer's config) gives the rounds and budgets of the survivors' timing only.
  std::vector<CandidateResult> measure_all(const std::vector<schedule::KernelSchedule>& schedules,
                                           MeasureObserver* observer = nullptr,
                                           const MeasureConfig* timing = nullptr);
  // Builds the reference, makes the random inputs and runs the reference once (the expected
  // outputs); measuring does this on first use. Done ahead, a forked worker process inherits it
  // all. Throws tessera::Error when the reference does not build or run.
  void prepare_reference() { prepare(); }
  // Threads building candidates from now on (MeasureConfig::build_threads).
  void set_build_threads(int n) { config_.build_threads = n; }

  // A call of `kernel` (built for this task, verified) on the measurer's inputs, its prepacked
  // inputs packed now: for timing it beside kernels of other tasks (the layout tuner's race).
  // The measurer must outlive the call.
  std::function<void()> runner(std::shared_ptr<const compiler::BuiltKernel> kernel);

  int num_measured() const { return num_measured_; }
  // The default-schedule kernel outputs are checked against (built on first use).
  std::shared_ptr<const compiler::BuiltKernel> reference_kernel();
  // Time spent building and running the default-schedule reference (0 until first measure).
  double reference_ms() const { return reference_ms_; }

 private:
  void build_reference();
  // Builds the reference and random inputs, and runs the reference once (the expected outputs).
  void prepare();
  // Builds every candidate (and the reference), config_.build_threads at a time; a failed
  // build leaves its kernel null and its error set. Throws when the reference fails.
  void build_all(const std::vector<schedule::KernelSchedule>& schedules,
                 std::vector<CandidateResult>* results,
                 std::vector<std::shared_ptr<const compiler::BuiltKernel>>* built,
                 MeasureObserver* observer);
  // Runs `kernel` (null: the reference, for the reference's schedule) once and checks its
  // outputs; the run's time goes to res->median_ms and the kernel to res->kernel.
  bool verify(const schedule::KernelSchedule& schedule,
              std::shared_ptr<const compiler::BuiltKernel> kernel, CandidateResult* res,
              MeasureObserver* observer = nullptr, size_t candidate = 0);
  // build_all, prepare, then verify each candidate in order. False when the reference failed
  // (then every result says so).
  bool build_and_verify(const std::vector<schedule::KernelSchedule>& schedules,
                        std::vector<CandidateResult>* results, MeasureObserver* observer = nullptr);
  // Buffers for `k` over `outputs` when it reads prepacked inputs (its pack kernels run now);
  // null when it reads none.
  std::shared_ptr<const KernelArgs> args_for(const compiler::BuiltKernel& k,
                                             std::vector<runtime::NDArray>& outputs);
  void run(const compiler::BuiltKernel& k, const KernelArgs* args);

  const Task& task_;
  MeasureConfig config_;
  bool prepared_ = false;
  std::shared_ptr<const compiler::BuiltKernel> reference_;
  std::shared_ptr<const KernelArgs> reference_args_;  // over outputs_ (see args_for)
  std::string reference_schedule_;                    // its schedule's stages_text()
  std::vector<runtime::NDArray> inputs_;
  std::vector<runtime::NDArray> expected_;
  std::vector<runtime::NDArray> outputs_;
  std::vector<double> atol_;  // per output, from the reference's magnitude
  std::vector<int64_t> size_values_;
  std::vector<void*> ptrs_;
  int num_measured_ = 0;
  double reference_ms_ = 0;
};

}  // namespace tessera::tune
