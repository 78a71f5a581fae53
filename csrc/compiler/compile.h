#pragma once
// The compile call: compute DAG + input signature + a typed request -> one built kernel and a
// typed report of how it was made. Every way into Tessera (the torch.compile backend,
// tessera.Kernel, tessera.op, the benchmarks) compiles through here, and every tuner plugs in
// here, so tuning policy (schedule/tuning_policy.h) is applied in one place:
//
//   plan the stages (once)
//   -> the schedule: the caller's | the records database's | tuned now | the rules'
//   -> the kernel: the tuner's verified winner as it was built for measurement, else built now
//
// Invariant: each kernel is lowered and JIT-compiled once per call (util/counters.h counts
// both; a kernel reading constant inputs prepacked adds one of each per pack kernel); a tuned
// candidate that wins is handed out as it was measured. Exceptions: in search mode the final
// race builds its few finalists again (they are timed in one paired batch), and a runner that
// measures in other processes hands back no kernel, so the winner is built once more here.
// Tuners measure candidates reading constant inputs prepacked, as the kernel will run (except
// on a Ray runner: its remote processes rebuild the task from its canonical text and measure
// candidates packing on every call).
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compiler/build.h"
#include "db/records.h"
#include "ir/tensor.h"
#include "schedule/annotation.h"
#include "tune/runner.h"

namespace tessera::compiler {

// How hard to tune: the rules' schedule, construct mode (Gensor, seconds), or search mode
// (Ansor-like evolutionary search with a learned cost model, the most tuning).
enum class TuneMode { kDefault, kConstruct, kSearch };
const char* tune_mode_name(TuneMode m);
TuneMode tune_mode_from_name(const std::string& name);  // "default" | "construct" | "search"

// Which kernels a tuning mode tunes: every one (what a caller who asks for tuning gets), or
// those whose tuning can pay back (worth_tuning: graphs tuned by default).
enum class TuneScope { kEvery, kAutomatic };
TuneScope tune_scope_from_name(const std::string& name);  // "every" | "automatic"

enum class Threads { kAuto, kParallel, kSerial };    // kAuto: TuningPolicy::serial_*
Threads threads_from_name(const std::string& name);  // "auto" | "parallel" | "serial"

// One measured search candidate, as it happens (progress bars, per-trial logs).
struct TrialEvent {
  std::string task;       // the request's name
  int trial = 0;          // measurements of this search so far, this one included
  int trials = 0;         // the search's budget
  bool ok = false;        // this candidate verified and timed
  double median_ms = -1;  // this candidate's time (-1: not ok)
  double best_ms = -1;    // best so far (-1: none yet)
  double flops = 0;       // floating-point work of one run (GFLOP/s = flops / best_ms / 1e6)
  double elapsed_s = 0;   // since the search started
};
using TrialCallback = std::function<void(const TrialEvent&)>;

struct CompileRequest {
  std::string name = "kernel";
  TuneMode tune = TuneMode::kDefault;
  TuneScope scope = TuneScope::kEvery;
  // kAutomatic: the summation points of the whole graph the kernel is part of (0: unknown),
  // so that a kernel doing a large share of its graph's work is tuned (worth_tuning).
  double graph_reduce_points = 0;
  Threads threads = Threads::kAuto;
  // Build exactly this schedule (no tuning, no records); a schedule that does not build is an
  // error.
  std::optional<schedule::KernelSchedule> schedule;
  // The kernel a tuner built from `schedule` over these outputs and inputs, verified and timed:
  // handed out instead of building the schedule again when it reads the same inputs prepacked
  // (and keep_source is off). Ignored without `schedule`.
  std::shared_ptr<const BuiltKernel> built;
  // Tuned schedules are looked up here before tuning and stored after it; search mode also logs
  // its measurements here and resumes from them (not owned; null: no records).
  db::RecordsDB* records = nullptr;
  bool keep_source = false;  // keep the optimised LLVM IR and assembly
  uint64_t seed = 0;         // the tuners' random streams
  int trials = 0;            // search mode's measurements (0: the policy's search_trials)
  int search_per_round = 0;  // search mode's measurements per round (0: the policy's)
  // Where search mode measures candidates (null: the default runner, see tune/runner.h).
  std::shared_ptr<tune::Runner> runner;
  // Called after each search measurement, on the compiling thread (empty: none).
  TrialCallback on_trial;
  // Positions (in `inputs`) of inputs whose values are the same on every call, e.g. weights.
  // Those the chosen schedule packs are packed once outside the kernel (schedule/prepack.h):
  // the kernel then takes their packed copies (BuiltKernel::prepacks).
  std::vector<int> constant_inputs;
};

// One schedule a tuner built, verified and timed.
struct CandidateReport {
  schedule::KernelSchedule schedule;
  double predicted_ms = -1;  // the tuner's model estimate (-1: none)
  bool ok = false;           // built, verified against the default schedule's output, timed
  std::string error;         // why not ok
  double median_ms = -1;     // paired-timing time (-1: not timed)
  double build_ms = 0;       // lowering + JIT (0: it was the reference, built once)
  int prepacked = 0;         // constant inputs it reads prepacked (one pack kernel built each)
  bool chosen = false;
};

struct CompileReport {
  std::string name;
  std::string workload;  // workload hash (hex) of the DAG; empty when no records were used
  // Where the schedule came from: "rules" (the default heuristics), "given" (the caller's),
  // "records" (tuned by an earlier process), or the tuner that chose it now, e.g.
  // "construct:gensor"; "rules" also when the tuned winner did not beat the rules' schedule by
  // the policy's win margin.
  std::string source = "rules";
  std::string tuner;  // the tuner that ran in this call ("" when none did)
  // Why the source is not what the request asked for (tuning skipped, budget spent, a stored
  // schedule that does not build, no candidate verified); empty when nothing to say.
  std::string note;
  bool parallel = true;
  schedule::KernelSchedule schedule;
  std::vector<CandidateReport> candidates;  // what the tuner measured (restored ones first)
  double median_ms = -1;                    // measured time of the kernel (-1: not measured)
  double default_ms = -1;                   // measured time of the rules' schedule (-1: not)
  int trials = 0;                           // candidates measured
  double plan_ms = 0, tune_s = 0, lower_ms = 0, jit_ms = 0, total_ms = 0;
};

struct CompileResult {
  std::shared_ptr<const BuiltKernel> kernel;
  CompileReport report;
};

// Never returns a kernel that was not verified or built from the rules: a tuned candidate must
// match the default schedule's output; a failing tuner or record costs tuning, not the kernel.
// Throws tessera::Error when the DAG cannot be compiled at all (or a given schedule does not fit).
CompileResult compile(const std::vector<ir::Tensor>& outputs, const std::vector<ir::Tensor>& inputs,
                      const CompileRequest& request = {});

// Whether a kernel over this plan is tuned in `scope`: always for kEvery; for kAutomatic when
// its summation work takes the policy's min_tuned_kernel_us at the host's FMA peak, or when it
// is at least large_share of graph_reduce_points (and takes min_share_kernel_us).
bool worth_tuning(const schedule::StagePlan& plan, TuneScope scope, double graph_reduce_points = 0);
// Whether a kernel over this plan runs its parallel loops on the thread pool (kAuto: the
// policy's serial_bytes and serial_points rule).
bool runs_in_parallel(const schedule::StagePlan& plan, Threads threads);

// The names of inputs[i] for i in `positions`: a request's constant inputs as a tune::Task names
// them. Throws tessera::Error for a position out of range.
std::vector<std::string> input_names(const std::vector<ir::Tensor>& inputs,
                                     const std::vector<int>& positions);

}  // namespace tessera::compiler
