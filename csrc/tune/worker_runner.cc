#include "tune/worker_runner.h"

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <mutex>
#include <optional>
#include <set>

#include "runtime/parallel.h"
#include "tune/worker_process.h"
#include "util/check.h"
#include "util/counters.h"

namespace tessera::tune {

namespace {

// ---- Fault injection ---------------------------------------------------------------------

// The OOM fault allocates (and touches) blocks this large until allocation fails.
constexpr size_t kFaultBlockBytes = size_t{64} << 20;

int64_t physical_memory_bytes() {
  return static_cast<int64_t>(::sysconf(_SC_PHYS_PAGES)) * ::sysconf(_SC_PAGE_SIZE);
}

// What a runaway candidate does: allocate until the worker's address-space limit refuses. With
// no limit in force it stops at half the machine's memory and ends the worker as the kernel's
// OOM killer would, before the machine swaps.
void allocate_until_out_of_memory() {
  rlimit lim{};
  ::getrlimit(RLIMIT_AS, &lim);
  const bool limited = lim.rlim_cur != RLIM_INFINITY;
  const int64_t cap = limited ? std::numeric_limits<int64_t>::max() : physical_memory_bytes() / 2;
  std::vector<char*> blocks;
  int64_t total = 0;
  char* block = nullptr;
  while (total < cap && (block = static_cast<char*>(std::malloc(kFaultBlockBytes))) != nullptr) {
    std::memset(block, 1, kFaultBlockBytes);  // touched: resident, not only reserved
    blocks.push_back(block);
    total += static_cast<int64_t>(kFaultBlockBytes);
  }
  volatile char sink = 0;
  for (char* b : blocks) {
    sink = static_cast<char>(sink + b[0]);  // the blocks are used: the allocations stay
    std::free(b);
  }
  if (!limited) ::raise(SIGKILL);
  TESSERA_CHECK(false) << "out of memory: allocation failed after " << (total >> 20)
                       << " MiB (the worker's address-space limit)";
}

void strike(InjectedFault::Kind kind) {
  switch (kind) {
    case InjectedFault::Kind::kNone:
      return;
    case InjectedFault::Kind::kSegfault:
      ::raise(SIGSEGV);
      return;
    case InjectedFault::Kind::kAbort:
      std::abort();
    case InjectedFault::Kind::kHang:
      for (;;) ::pause();
    case InjectedFault::Kind::kOutOfMemory:
      allocate_until_out_of_memory();
      return;
  }
}

InjectedFault::Kind fault_kind(const std::string& name) {
  if (name == "segfault") return InjectedFault::Kind::kSegfault;
  if (name == "abort") return InjectedFault::Kind::kAbort;
  if (name == "hang") return InjectedFault::Kind::kHang;
  if (name == "oom") return InjectedFault::Kind::kOutOfMemory;
  TESSERA_CHECK(false) << "unknown fault '" << name << "' (expected segfault, abort, hang or oom)";
  return InjectedFault::Kind::kNone;
}

InjectedFault::Phase fault_phase(const std::string& name) {
  if (name == "run") return InjectedFault::Phase::kRun;
  if (name == "build") return InjectedFault::Phase::kBuild;
  if (name == "timing") return InjectedFault::Phase::kTiming;
  TESSERA_CHECK(false) << "unknown fault phase '" << name << "' (expected run, build or timing)";
  return InjectedFault::Phase::kRun;
}

// ---- Messages: one line per event ----------------------------------------------------------
//   B i                build of candidate i started      b i RESULT   built (error: build failed)
//   R i                its verification run started      V i RESULT   verified
//   T                  timing of the survivors started   D i RESULT   final result
//   C k delta          counter k's growth in the worker  Z            done
//   X text             the worker failed as a whole
// i is the candidate's index in the measure() batch; RESULT is
// "ok abandoned median_ms build_ms repeats rounds error" with the error escaped (\\ and \n).

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) {
      out += s[i + 1] == 'n' ? '\n' : s[i + 1];
      ++i;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::string result_line(char tag, size_t index, const CandidateResult& r) {
  char head[160];
  std::snprintf(head, sizeof(head), "%c %zu %d %d %.17g %.17g %d %d ", tag, index, r.ok ? 1 : 0,
                r.abandoned ? 1 : 0, r.median_ms, r.build_ms, r.repeats, r.rounds);
  return head + escape(r.error);
}

struct Message {
  char tag = 0;
  size_t index = 0;
  int64_t value = 0;  // C: the counter's growth
  CandidateResult result;
  std::string text;  // X
};

Message parse_message(const std::string& line) {
  Message m;
  TESSERA_CHECK(!line.empty()) << "empty message from a worker";
  m.tag = line[0];
  const char* rest = line.c_str() + 1;
  bool ok = true;
  switch (m.tag) {
    case 'T':
    case 'Z':
      break;
    case 'X':
      m.text = unescape(line.size() > 2 ? line.substr(2) : "");
      break;
    case 'B':
    case 'R':
      ok = std::sscanf(rest, " %zu", &m.index) == 1;
      break;
    case 'C':
      ok = std::sscanf(rest, " %zu %" SCNd64, &m.index, &m.value) == 2;
      break;
    case 'b':
    case 'V':
    case 'D': {
      int good = 0, abandoned = 0, used = 0;
      CandidateResult& r = m.result;
      ok = std::sscanf(rest, " %zu %d %d %lg %lg %d %d %n", &m.index, &good, &abandoned,
                       &r.median_ms, &r.build_ms, &r.repeats, &r.rounds, &used) == 7;
      r.ok = good != 0;
      r.abandoned = abandoned != 0;
      if (ok) r.error = unescape(std::string(rest + used));
      break;
    }
    default:
      ok = false;
  }
  TESSERA_CHECK(ok) << "malformed worker message: " << line;
  return m;
}

// ---- The worker (child process) ------------------------------------------------------------

// One worker's share of a batch: the candidates not yet reported, by batch index.
struct Job {
  std::vector<size_t> batch_index;
  std::vector<schedule::KernelSchedule> schedules;
  bool serial_build = false;
  const MeasureConfig* timing = nullptr;  // the survivors' timing (null: the measurer's config)
};

// What the worker inherits beyond the measurer.
struct WorkerSetup {
  int threads = 1;             // the parent's thread count for kernels
  uint64_t address_space = 0;  // RLIMIT_AS (0: unchanged)
  InjectedFault fault;         // none: TESSERA_FAULT_INJECT's
};

// Reports the measurer's steps to the parent, and injects the fault.
class ReportingObserver : public MeasureObserver {
 public:
  ReportingObserver(int fd, const Job& job, InjectedFault fault)
      : fd_(fd), job_(job), fault_(std::move(fault)) {}

  void send(const std::string& line) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!write_all(fd_, line + "\n")) ::_exit(kParentGoneStatus);
  }
  void build_started(size_t c) override {
    send("B " + std::to_string(job_.batch_index[c]));
    if (strikes(c, InjectedFault::Phase::kBuild)) strike(fault_.kind);
  }
  void built(size_t c, const CandidateResult& r) override {
    send(result_line('b', job_.batch_index[c], r));
  }
  void run_started(size_t c) override {
    send("R " + std::to_string(job_.batch_index[c]));
    if (strikes(c, InjectedFault::Phase::kRun)) strike(fault_.kind);
  }
  void verified(size_t c, const CandidateResult& r) override {
    send(result_line('V', job_.batch_index[c], r));
  }
  void timing_started() override {
    send("T");
    for (size_t c = 0; c < job_.batch_index.size(); ++c) {
      if (strikes(c, InjectedFault::Phase::kTiming)) strike(fault_.kind);
    }
  }

  static constexpr int kParentGoneStatus = 121;

 private:
  bool strikes(size_t c, InjectedFault::Phase phase) const {
    if (!fault_.any() || fault_.phase != phase) return false;
    if (fault_.candidate >= 0) return job_.batch_index[c] == static_cast<size_t>(fault_.candidate);
    return job_.schedules[c].stages_text().find(fault_.stages_contains) != std::string::npos;
  }

  int fd_;
  const Job& job_;
  InjectedFault fault_;
  std::mutex mu_;
};

constexpr util::Counter kWorkerCounters[] = {util::Counter::kLowerings, util::Counter::kJitCompiles,
                                             util::Counter::kCandidates,
                                             util::Counter::kTimingRuns};

// The host's fault handlers (Python's faulthandler) are not the worker's: a crash ends the worker
// with its signal, which the parent reports.
void reset_crash_handlers() {
  for (int sig : {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL}) ::signal(sig, SIG_DFL);
  ::signal(SIGPIPE, SIG_IGN);  // a gone parent shows as a failed write
}

[[noreturn]] void worker_main(int fd, CandidateMeasurer& measurer, const Job& job,
                              const WorkerSetup& setup) {
  constexpr int kWorkerFailedStatus = 3;
  reset_crash_handlers();
  // The host's team (torch's OpenMP threads) did not survive the fork: Tessera's own pool, with
  // as many threads as the kernels will have in the parent.
  runtime::set_team_launcher(nullptr);
  runtime::set_num_threads(setup.threads);
  if (setup.address_space > 0) {
    rlimit lim{};
    ::getrlimit(RLIMIT_AS, &lim);
    const rlim_t want = static_cast<rlim_t>(setup.address_space);
    lim.rlim_cur = lim.rlim_max == RLIM_INFINITY ? want : std::min(want, lim.rlim_max);
    ::setrlimit(RLIMIT_AS, &lim);
  }
  if (job.serial_build) measurer.set_build_threads(1);
  int64_t counters_before[std::size(kWorkerCounters)];
  for (size_t k = 0; k < std::size(kWorkerCounters); ++k) {
    counters_before[k] = util::read(kWorkerCounters[k]);
  }
  std::optional<ReportingObserver> observer;
  try {
    observer.emplace(fd, job, setup.fault.any() ? setup.fault : fault_from_environment());
    const std::vector<CandidateResult> results =
        measurer.measure_all(job.schedules, &*observer, job.timing);
    for (size_t c = 0; c < results.size(); ++c) {
      observer->send(result_line('D', job.batch_index[c], results[c]));
    }
    for (size_t k = 0; k < std::size(kWorkerCounters); ++k) {
      observer->send("C " + std::to_string(static_cast<int>(kWorkerCounters[k])) + " " +
                     std::to_string(util::read(kWorkerCounters[k]) - counters_before[k]));
    }
    observer->send("Z");
    ::_exit(0);
  } catch (const std::exception& e) {
    write_all(fd, "X " + escape(e.what()) + "\n");
  } catch (...) {
    write_all(fd, "X unknown exception\n");
  }
  ::_exit(kWorkerFailedStatus);
}

// ---- The parent -----------------------------------------------------------------------------

// This process's address-space size (what RLIMIT_AS counts), from /proc/self/statm.
uint64_t address_space_bytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t pages = 0;
  statm >> pages;
  return pages * static_cast<uint64_t>(::sysconf(_SC_PAGE_SIZE));
}

// What one worker reported before it ended.
struct WorkerLog {
  std::set<size_t> building;
  std::optional<size_t> running;
  bool timing = false;
  bool done = false;            // sent Z
  std::string failure;          // sent X
  double survivors_run_ms = 0;  // sum of the survivors' verification runs
  std::vector<size_t> survivors;
};

// A batch being measured: the results reported so far.
struct Batch {
  Batch(const std::vector<schedule::KernelSchedule>& s, const MeasureConfig& t)
      : schedules(s), timing(t), results(s.size()) {}
  const std::vector<schedule::KernelSchedule>& schedules;
  const MeasureConfig& timing;  // the survivors' timing
  std::vector<std::optional<CandidateResult>> results;
  bool serial_build = false;
  int timing_crashes = 0;
  int silent_crashes = 0;

  std::vector<size_t> pending() const {
    std::vector<size_t> out;
    for (size_t i = 0; i < results.size(); ++i) {
      if (!results[i]) out.push_back(i);
    }
    return out;
  }
  void fail(size_t i, const std::string& error) {
    CandidateResult r;
    r.error = error;
    results[i] = std::move(r);
  }
};

class WorkerTaskRunner : public TaskRunner {
 public:
  WorkerTaskRunner(const Task& task, const WorkerRunnerOptions& options)
      : options_(options),
        measurer_(task, options.measure),
        race_(final_race_config(options.measure)) {
    try {
      measurer_.prepare_reference();  // before any fork: every worker inherits it
    } catch (const std::exception& e) {
      const std::string what = e.what();
      reference_error_ =
          what.rfind("reference", 0) == 0 ? what : "reference kernel failed: " + what;
    }
  }

  std::vector<CandidateResult> measure(
      const std::vector<schedule::KernelSchedule>& schedules) override {
    return measure_with(schedules, options_.measure);
  }
  std::vector<CandidateResult> measure_final_race(
      const std::vector<schedule::KernelSchedule>& schedules) override {
    return measure_with(schedules, race_);
  }

 private:
  // measure(), the survivors timed by `timing`'s rounds and budgets.
  std::vector<CandidateResult> measure_with(const std::vector<schedule::KernelSchedule>& schedules,
                                            const MeasureConfig& timing) {
    Batch batch(schedules, timing);
    if (!reference_error_.empty()) {
      for (size_t i = 0; i < schedules.size(); ++i) batch.fail(i, reference_error_);
    }
    // Each worker after the first reports at least one candidate, or changes how the next one
    // works (serial builds, the timing retry, the start-up retry): this many always suffice.
    const size_t max_workers = schedules.size() + 4;
    for (size_t w = 0; w < max_workers && !batch.pending().empty(); ++w) run_worker(&batch);
    for (size_t i : batch.pending()) batch.fail(i, "worker processes kept crashing");
    std::vector<CandidateResult> out;
    for (std::optional<CandidateResult>& r : batch.results) out.push_back(std::move(*r));
    return out;
  }

  Job make_job(const Batch& batch) const {
    Job job;
    job.batch_index = batch.pending();
    for (size_t i : job.batch_index) job.schedules.push_back(batch.schedules[i]);
    job.serial_build = batch.serial_build;
    job.timing = &batch.timing;
    return job;
  }

  WorkerSetup make_setup() const {
    WorkerSetup s;
    s.threads = runtime::get_num_threads();
    if (options_.memory_budget_mb > 0) {
      s.address_space =
          address_space_bytes() + static_cast<uint64_t>(options_.memory_budget_mb) * (1u << 20);
    }
    s.fault = options_.fault;
    return s;
  }

  // How long the timing phase may go without a message: the silence timeout plus the rounds'
  // expected time under `m` (every survivor's round next to a reference round, a round being
  // round_ms or a few calls of a slow kernel, judged by the verification runs) and the timing
  // budgets.
  double timing_timeout_s(const WorkerLog& log, const MeasureConfig& m) const {
    constexpr double kCallsPerSlowRound = 3;  // one untimed call and min_calls timed ones
    const double per_round_ms = 2 * (static_cast<double>(log.survivors.size()) * m.round_ms +
                                     kCallsPerSlowRound * log.survivors_run_ms);
    const double rounds_ms = (m.rounds + m.final_rounds) * per_round_ms;
    return options_.timeout_s + (rounds_ms + m.timing_budget_ms + m.final_budget_ms) / 1e3;
  }

  void record(const Message& m, WorkerLog* log, Batch* batch) {
    const bool names_candidate = m.tag != 'T' && m.tag != 'Z' && m.tag != 'X' && m.tag != 'C';
    TESSERA_CHECK(!names_candidate || m.index < batch->results.size())
        << "worker reported candidate " << m.index << " of " << batch->results.size();
    TESSERA_CHECK(m.tag != 'C' || m.index < static_cast<size_t>(util::Counter::kCount))
        << "worker reported counter " << m.index;
    switch (m.tag) {
      case 'B':
        log->building.insert(m.index);
        break;
      case 'b':
        log->building.erase(m.index);
        if (!m.result.error.empty()) batch->results[m.index] = m.result;  // the build failed
        break;
      case 'R':
        log->running = m.index;
        break;
      case 'V':
        log->running.reset();
        if (!m.result.ok) {
          batch->results[m.index] = m.result;
        } else {
          log->survivors.push_back(m.index);
          log->survivors_run_ms += m.result.median_ms;
        }
        break;
      case 'T':
        log->timing = true;
        break;
      case 'D':
        batch->results[m.index] = m.result;
        break;
      case 'C':
        util::bump(static_cast<util::Counter>(m.index), m.value);
        break;
      case 'Z':
        log->done = true;
        break;
      case 'X':
        log->failure = m.text;
        break;
      default:
        TESSERA_CHECK(false) << "unknown worker message '" << m.tag << "'";
    }
  }

  // One worker measures the batch's pending candidates; a crash is pinned on what was in flight.
  void run_worker(Batch* batch) {
    const Job job = make_job(*batch);
    const WorkerSetup setup = make_setup();
    WorkerProcess worker([&](int fd) { worker_main(fd, measurer_, job, setup); });
    WorkerLog log;
    std::string fate;
    std::string line;
    while (!log.done && log.failure.empty()) {
      const double timeout = log.timing ? timing_timeout_s(log, batch->timing) : options_.timeout_s;
      const WorkerProcess::Read r = worker.next_line(timeout, &line);
      if (r == WorkerProcess::Read::kLine) {
        record(parse_message(line), &log, batch);
        continue;
      }
      if (r == WorkerProcess::Read::kTimedOut) {
        worker.kill_and_reap();
        char buf[64];
        std::snprintf(buf, sizeof(buf), "timed out after %g s", timeout);
        fate = buf;
      } else {
        fate = worker.wait_exit();
        if (fate.empty()) fate = "ended without reporting its results";
      }
      break;
    }
    if (log.done) {
      worker.wait_exit();
      return;
    }
    if (!log.failure.empty()) {
      for (size_t i : batch->pending()) batch->fail(i, "worker failed: " + log.failure);
      return;
    }
    settle_crash(log, "worker " + fate, batch);
  }

  static void settle_crash(const WorkerLog& log, const std::string& fate, Batch* batch) {
    if (log.running) {
      batch->fail(*log.running, fate + " while running candidate");
    } else if (log.timing) {
      // The survivors are measured again by the next worker, once.
      if (++batch->timing_crashes >= 2) {
        for (size_t i : batch->pending()) batch->fail(i, fate + " while timing candidates (twice)");
      }
    } else if (log.building.size() == 1) {
      batch->fail(*log.building.begin(), fate + " while building candidate");
    } else if (log.building.size() > 1 && !batch->serial_build) {
      batch->serial_build = true;  // built one at a time, the next crash names the culprit
    } else if (!log.building.empty()) {
      for (size_t i : log.building) batch->fail(i, fate + " while building candidate");
    } else if (++batch->silent_crashes >= 2) {
      for (size_t i : batch->pending()) {
        batch->fail(i, fate + " before measuring any candidate (twice)");
      }
    }
  }

  WorkerRunnerOptions options_;
  CandidateMeasurer measurer_;
  MeasureConfig race_;  // final_race_config(options_.measure)
  std::string reference_error_;
};

class WorkerRunner : public Runner {
 public:
  explicit WorkerRunner(WorkerRunnerOptions options) : options_(std::move(options)) {}
  std::string name() const override { return "workers"; }
  std::unique_ptr<TaskRunner> open(const Task& task) override {
    return std::make_unique<WorkerTaskRunner>(task, options_);
  }

 private:
  WorkerRunnerOptions options_;
};

}  // namespace

InjectedFault InjectedFault::parse(const std::string& spec) {
  InjectedFault f;
  if (spec.empty()) return f;
  const size_t colon = spec.find(':');
  TESSERA_CHECK(colon != std::string::npos)
      << "fault '" << spec << "': expected KIND:INDEX or KIND:stages=TEXT";
  f.kind = fault_kind(spec.substr(0, colon));
  std::string where = spec.substr(colon + 1);
  const size_t at = where.rfind('@');
  if (at != std::string::npos) {
    f.phase = fault_phase(where.substr(at + 1));
    where.resize(at);
  }
  const std::string stages_prefix = "stages=";
  if (where.rfind(stages_prefix, 0) == 0) {
    f.stages_contains = where.substr(stages_prefix.size());
    TESSERA_CHECK(!f.stages_contains.empty()) << "fault '" << spec << "': empty stages text";
    return f;
  }
  size_t used = 0;
  try {
    f.candidate = std::stoi(where, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  TESSERA_CHECK(used == where.size() && used > 0 && f.candidate >= 0)
      << "fault '" << spec << "': '" << where << "' is not a candidate index";
  return f;
}

InjectedFault fault_from_environment() {
  const char* spec = std::getenv("TESSERA_FAULT_INJECT");
  return InjectedFault::parse(spec ? spec : "");
}

int64_t default_worker_memory_budget_mb() {
  return static_cast<int64_t>(kWorkerMemoryShareOfRam *
                              static_cast<double>(physical_memory_bytes()) / (1 << 20));
}

std::shared_ptr<Runner> worker_runner(WorkerRunnerOptions options) {
  return std::make_shared<WorkerRunner>(std::move(options));
}

}  // namespace tessera::tune
