#pragma once
// The worker-process runner: search mode's default (tune/runner.h). Candidates are built,
// verified and timed in a forked child process, so a candidate that crashes, hangs or runs out of
// memory fails as a candidate instead of taking the user's process (a Python session inside
// torch.compile) with it.
//
// How. open() prepares the task's CandidateMeasurer reference in this process (the
// default-schedule kernel, random inputs, expected outputs). Each measure() forks a worker that
// inherits all of it (no serialization), measures the batch exactly as CandidateMeasurer::
// measure_all does, and reports every step over a pipe: started building / built, started the
// verification run / verified, timing started, then the final results. The worker never touches
// Python (it uses Tessera's own thread pool, not the host's team) and _exit()s.
//
// When a worker dies (a signal, a non-zero exit) or says nothing for too long (it is killed):
//   - while running a candidate's verification run: that candidate fails ("worker crashed with
//     SIGSEGV while running candidate", "timed out after 20 s ...", "worker was killed (SIGKILL:
//     out of memory?) ...");
//   - while building one candidate: that candidate fails; while building several at once: they
//     are built again one at a time by the next worker, which pins the culprit;
//   - while timing the survivors: they are measured again by a new worker once; a second crash
//     fails them all.
// A new worker then measures the candidates not yet reported. Results carry no kernel (the caller
// builds the winner again). Every worker is reaped; one still running when measure() unwinds is
// killed first.
//
// Fault injection (tests): WorkerRunnerOptions::fault, else the environment variable
// TESSERA_FAULT_INJECT, read in the worker only:
//   KIND:INDEX[@PHASE]        the candidate at INDEX of each measure() batch, e.g. "segfault:3"
//   KIND:stages=TEXT[@PHASE]  every candidate whose stages_text() contains TEXT
// KIND is segfault | abort | hang | oom (allocates until the address-space limit stops it).
// PHASE says when it strikes: run (the default: right before the candidate's verification run),
// build (as its build starts) or timing (as the timing of a worker holding it starts).
#include <cstdint>
#include <memory>
#include <string>

#include "tune/runner.h"

namespace tessera::tune {

struct InjectedFault {
  enum class Kind { kNone, kSegfault, kAbort, kHang, kOutOfMemory };
  enum class Phase { kRun, kBuild, kTiming };
  Kind kind = Kind::kNone;
  Phase phase = Phase::kRun;
  int candidate = -1;           // index in each measure() batch (-1: by stages_contains)
  std::string stages_contains;  // used when candidate < 0

  bool any() const { return kind != Kind::kNone; }
  // "segfault:3", "oom:stages=tile_reg@build" (see above); "" is no fault. Throws tessera::Error on
  // a malformed spec.
  static InjectedFault parse(const std::string& spec);
};

// The fault TESSERA_FAULT_INJECT names (none when unset or empty).
InjectedFault fault_from_environment();

// Seconds a worker may go without reporting a step before it is considered hung.
inline constexpr double kWorkerSilenceTimeoutS = 20;
// A worker may map this share of physical memory beyond what its parent had mapped at fork.
inline constexpr double kWorkerMemoryShareOfRam = 0.5;

// kWorkerMemoryShareOfRam of this machine's physical memory, in MiB.
int64_t default_worker_memory_budget_mb();

struct WorkerRunnerOptions {
  MeasureConfig measure;
  // A worker that reports nothing for this long is killed and its candidate in flight fails.
  // The timing phase gets this plus the time its rounds are expected to take.
  double timeout_s = kWorkerSilenceTimeoutS;
  // The worker's address-space limit (RLIMIT_AS) is the parent's address-space size at fork plus
  // this; 0: no limit.
  int64_t memory_budget_mb = default_worker_memory_budget_mb();
  // Tests: a fault to inject (none: TESSERA_FAULT_INJECT's, read in the worker).
  InjectedFault fault;
};

// Measures in forked worker processes, as described above.
std::shared_ptr<Runner> worker_runner(WorkerRunnerOptions options = {});

}  // namespace tessera::tune
