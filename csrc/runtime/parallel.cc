#include "runtime/parallel.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace tessera::runtime {
namespace {

thread_local bool t_in_parallel = false;

// Restores t_in_parallel even when a body throws.
class ParallelRegionGuard {
 public:
  ParallelRegionGuard() : saved_(t_in_parallel) { t_in_parallel = true; }
  ~ParallelRegionGuard() { t_in_parallel = saved_; }
  ParallelRegionGuard(const ParallelRegionGuard&) = delete;
  ParallelRegionGuard& operator=(const ParallelRegionGuard&) = delete;

 private:
  bool saved_;
};

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

int hardware_threads() {
  // The affinity mask, not the machine size: under taskset/cgroups we must not spawn more threads
  // than CPUs we may run on.
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  unsigned hc = std::thread::hardware_concurrency();
  return hc > 0 ? static_cast<int>(hc) : 1;
}

// How long an idle worker keeps polling for the next job before it sleeps. Waking a sleeping
// thread is expensive, especially in VMs, where it needs an IPI to a halted vCPU: measured 40-200
// us on the KVM dev machine versus 0.25 us for a hot dispatch. Kernel calls from a graph executor
// or a measurement loop arrive within microseconds of each other and Python-driven eager calls
// within tens, so 500 us keeps the pool hot across them while burning at most half a millisecond of
// an otherwise idle core after the last call. TESSERA_POOL_SPIN_US overrides it (0: sleep at once).
std::chrono::microseconds worker_spin_budget() {
  static const std::chrono::microseconds value = [] {
    long us = 500;
    if (const char* env = std::getenv("TESSERA_POOL_SPIN_US")) {
      char* end = nullptr;
      long v = std::strtol(env, &end, 10);
      if (end != env && v >= 0) us = v;
    }
    return std::chrono::microseconds(us);
  }();
  return value;
}

// The caller waits for workers that are already running its job, and its core has nothing else to
// do meanwhile, so it polls longer before paying for a sleep and a second wake-up.
std::chrono::microseconds caller_spin_budget() {
  return std::max(worker_spin_budget(), std::chrono::microseconds(2000));
}

// Polls pred() until it holds or `budget` has passed; returns pred()'s final value. The first few
// microseconds use PAUSE (lowest latency); after that each poll yields the CPU, so a thread that
// shares this core (another process, or a descheduled worker we are waiting for) can run.
template <typename Pred>
bool spin_until(Pred pred, std::chrono::microseconds budget) {
  if (pred()) return true;
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto pause_until = start + std::min(budget, std::chrono::microseconds(20));
  const auto deadline = start + budget;
  for (unsigned i = 1;; ++i) {
    cpu_relax();
    if (pred()) return true;
    // Reading the clock every iteration would dominate the loop; every 64 pauses is plenty.
    if ((i & 63) == 0 && Clock::now() >= pause_until) break;
  }
  while (Clock::now() < deadline) {
    std::this_thread::yield();
    if (pred()) return true;
  }
  return pred();
}

// Chunks per thread and job: enough that a preempted thread's share is mostly taken over by the
// others, few enough that each chunk is a contiguous run of tasks (cache tiles next to each other
// share operand blocks) and the shared counter is touched rarely.
constexpr int64_t kChunksPerThread = 4;

// One parallel loop split into chunks that threads take until none is left: Tessera's pool and a
// host team (set_team_launcher) run the same jobs. Chunks are balanced contiguous ranges; a body's
// exception is kept (the first one) and rethrown on the caller by rethrow_error().
struct ChunkedJob {
  ParallelBody body = nullptr;
  void* closure = nullptr;
  int64_t num_tasks = 0;
  int64_t num_chunks = 0;
  std::atomic<int64_t> next_chunk{0};
  std::mutex error_mu;
  std::exception_ptr error;

  // Prepares the job; chunks below first_free are handed out by the caller itself.
  void reset(ParallelBody b, void* c, int64_t tasks, int threads, int64_t first_free) {
    body = b;
    closure = c;
    num_tasks = tasks;
    num_chunks = std::min<int64_t>(tasks, int64_t{threads} * kChunksPerThread);
    next_chunk.store(first_free, std::memory_order_relaxed);
    error = nullptr;
  }

  void run_chunk(int64_t chunk) {
    // Balanced split into contiguous ranges: the first (n % chunks) chunks get one extra task.
    const int64_t q = num_tasks / num_chunks;
    const int64_t r = num_tasks % num_chunks;
    const int64_t begin = chunk * q + std::min<int64_t>(chunk, r);
    const int64_t end = begin + q + (chunk < r ? 1 : 0);
    try {
      ParallelRegionGuard guard;
      body(closure, begin, end);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mu);
      if (!error) error = std::current_exception();
    }
  }

  // Takes the next chunk until none is left. Handing chunks out dynamically means a thread the OS
  // preempts (other processes on a busy machine) delays only the chunk it holds: the others take
  // over the rest of its share.
  void run_chunks() {
    for (;;) {
      const int64_t chunk = next_chunk.fetch_add(1, std::memory_order_relaxed);
      if (chunk >= num_chunks) return;
      run_chunk(chunk);
    }
  }

  void rethrow_error() {
    if (!error) return;
    std::exception_ptr e = error;
    error = nullptr;
    std::rethrow_exception(e);
  }
};

class Pool {
 public:
  explicit Pool(int num_threads) : size_(num_threads) {
    workers_.reserve(static_cast<size_t>(size_ - 1));
    for (int w = 1; w < size_; ++w) workers_.emplace_back([this] { worker_main(); });
  }

  ~Pool() {
    stop_.store(true);
    generation_.fetch_add(1);
    {
      std::lock_guard<std::mutex> lock(wake_mu_);
      wake_cv_.notify_all();
    }
    for (auto& t : workers_) t.join();
  }

  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  int size() const { return size_; }

  // Runs one job. The caller must have exclusive use of the pool (see PoolState::call_mu).
  void run(int64_t num_tasks, ParallelBody body, void* closure) {
    // Job fields are plain members: workers read them only after observing the new generation
    // (release/acquire on generation_), and we do not touch them again until every worker has
    // acknowledged via pending_. Every worker acknowledges every job, even without a chunk, so no
    // worker can lag a job behind and read fields of the next one.
    job_.reset(body, closure, num_tasks, size_, 1);  // chunk 0 is the caller's
    pending_.store(size_ - 1, std::memory_order_relaxed);

    // seq_cst pairs with the worker's sleepers_ increment: either we see the sleeper and notify,
    // or the sleeper sees the new generation before waiting (no lost wake-up).
    generation_.fetch_add(1);
    if (sleepers_.load() > 0) {
      std::lock_guard<std::mutex> lock(wake_mu_);
      wake_cv_.notify_all();
    }

    job_.run_chunk(0);
    job_.run_chunks();
    wait_for_workers();
    job_.rethrow_error();
  }

 private:
  void wait_for_workers() {
    if (spin_until([this] { return pending_.load(std::memory_order_acquire) == 0; },
                   caller_spin_budget())) {
      return;
    }
    // Dekker-style handshake with the last worker, see worker_main.
    caller_sleeping_.store(true);
    {
      std::unique_lock<std::mutex> lock(done_mu_);
      done_cv_.wait(lock, [this] { return pending_.load() == 0; });
    }
    caller_sleeping_.store(false);
  }

  void worker_main() {
    t_in_parallel = true;  // nested parallel_for on a worker always runs inline
    uint64_t seen = 0;
    while (true) {
      uint64_t gen = 0;
      auto changed = [&] {
        gen = generation_.load(std::memory_order_acquire);
        return gen != seen;
      };
      if (!spin_until(changed, worker_spin_budget())) {
        std::unique_lock<std::mutex> lock(wake_mu_);
        sleepers_.fetch_add(1);
        wake_cv_.wait(lock, [&] {
          gen = generation_.load();
          return gen != seen;
        });
        sleepers_.fetch_sub(1);
      }
      if (stop_.load()) return;
      seen = gen;
      job_.run_chunks();
      if (pending_.fetch_sub(1) == 1 && caller_sleeping_.load()) {
        std::lock_guard<std::mutex> lock(done_mu_);
        done_cv_.notify_one();
      }
    }
  }

  const int size_;
  std::vector<std::thread> workers_;

  ChunkedJob job_;  // the current job

  std::atomic<uint64_t> generation_{0};  // bumped once per job (and once to stop)
  std::atomic<int> pending_{0};          // workers that have not acknowledged the job yet
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
  std::atomic<bool> caller_sleeping_{false};
  std::mutex wake_mu_;
  std::condition_variable wake_cv_;
  std::mutex done_mu_;
  std::condition_variable done_cv_;
};

// The process-wide pool and the lock that gives one caller at a time exclusive use of it. Held by
// pointer and never freed: at process exit workers may still be parked on it, and after fork() the
// child replaces it wholesale (its copy may have locked mutexes and threads that do not exist).
struct PoolState {
  std::mutex call_mu;
  std::unique_ptr<Pool> pool;
};

std::atomic<int> g_requested_threads{0};  // 0: not set, use hardware_threads()
std::atomic<PoolState*> g_state{nullptr};

void reset_after_fork() { g_state.store(new PoolState); }

PoolState* state() {
  static PoolState* const initial = [] {
    auto* s = new PoolState;
    g_state.store(s);
    pthread_atfork(nullptr, nullptr, reset_after_fork);
    return s;
  }();
  (void)initial;
  return g_state.load(std::memory_order_acquire);
}

std::atomic<TeamLauncher> g_team_launcher{nullptr};
std::atomic<TeamSize> g_team_size{nullptr};

// A host team runs the job: every member takes chunks until none is left.
void run_on_team(TeamLauncher launch, int num_threads, int64_t num_tasks, ParallelBody body,
                 void* closure) {
  ChunkedJob job;
  job.reset(body, closure, num_tasks, num_threads, 0);
  launch([](void* data) { static_cast<ChunkedJob*>(data)->run_chunks(); }, &job, num_threads);
  job.rethrow_error();
}

void run_serial(int64_t num_tasks, ParallelBody body, void* closure) {
  ParallelRegionGuard guard;
  body(closure, 0, num_tasks);
}

}  // namespace

void set_num_threads(int n) {
  // A cap only guards against absurd values (e.g. an uninitialised int); real configs are far
  // below.
  g_requested_threads.store(n <= 0 ? 0 : std::min(n, 1024));
}

int get_num_threads() {
  if (int n = g_requested_threads.load(); n > 0) return n;
  // Set only together with a launcher (set_team_launcher clears it with the launcher).
  if (TeamSize size = g_team_size.load()) return std::clamp(size(), 1, 1024);
  return hardware_threads();
}

bool in_parallel_region() { return t_in_parallel; }

void set_team_launcher(TeamLauncher launch, TeamSize team_size) {
  g_team_size.store(launch ? team_size : nullptr);
  g_team_launcher.store(launch);
}

TeamLauncher team_launcher() { return g_team_launcher.load(); }

void parallel_for(int64_t num_tasks, ParallelBody body, void* closure) {
  if (num_tasks <= 0) return;
  if (t_in_parallel) {
    body(closure, 0, num_tasks);
    return;
  }
  const int want = get_num_threads();
  if (want <= 1 || num_tasks == 1) {
    run_serial(num_tasks, body, closure);
    return;
  }
  if (TeamLauncher launch = g_team_launcher.load(std::memory_order_acquire)) {
    run_on_team(launch, want, num_tasks, body, closure);
    return;
  }
  PoolState* s = state();
  std::unique_lock<std::mutex> lock(s->call_mu, std::try_to_lock);
  if (!lock.owns_lock()) {
    // Another user thread is running a parallel loop: run ours on this thread instead of queueing.
    run_serial(num_tasks, body, closure);
    return;
  }
  if (!s->pool || s->pool->size() != want) {
    s->pool.reset();  // joins the old workers
    s->pool = std::make_unique<Pool>(want);
  }
  s->pool->run(num_tasks, body, closure);
}

}  // namespace tessera::runtime

extern "C" void tessera_parallel_for(int64_t num_tasks, void (*body)(void*, int64_t, int64_t),
                                     void* closure) {
  try {
    tessera::runtime::parallel_for(num_tasks, body, closure);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessera_parallel_for: body threw: %s\n", e.what());
    std::terminate();
  } catch (...) {
    std::fprintf(stderr, "tessera_parallel_for: body threw a non-std exception\n");
    std::terminate();
  }
}
