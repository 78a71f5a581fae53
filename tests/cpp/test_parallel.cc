// Tests for the thread pool: coverage and balance of the chunks, dynamic hand-out, nesting,
// concurrent callers, resizing, exceptions, the C ABI entry point, behaviour after fork(), and
// loops handed to a host thread team (set_team_launcher).

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/parallel.h"

namespace tessera::runtime {
namespace {

// Records every [begin, end) chunk and which thread ran it, and counts visits per index.
struct Recorder {
  explicit Recorder(int64_t n) : visits(static_cast<size_t>(n)) {}
  std::vector<std::atomic<int>> visits;
  std::mutex mu;
  std::vector<std::pair<int64_t, int64_t>> chunks;
  std::set<std::thread::id> threads;

  static void body(void* closure, int64_t begin, int64_t end) {
    auto* self = static_cast<Recorder*>(closure);
    for (int64_t i = begin; i < end; ++i) self->visits[static_cast<size_t>(i)].fetch_add(1);
    std::lock_guard<std::mutex> lock(self->mu);
    self->chunks.emplace_back(begin, end);
    self->threads.insert(std::this_thread::get_id());
  }
};

// Restores the default thread count whatever a test sets.
class ParallelTest : public ::testing::Test {
 protected:
  void TearDown() override { set_num_threads(0); }
};

void expect_exact_balanced_cover(Recorder& rec, int64_t n, int threads) {
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(rec.visits[static_cast<size_t>(i)].load(), 1) << "index " << i << " n=" << n;
  }
  auto chunks = rec.chunks;
  std::sort(chunks.begin(), chunks.end());
  // One chunk for a single thread; otherwise up to four per thread, handed out dynamically.
  const int64_t expected_chunks = threads == 1 ? 1 : std::min<int64_t>(n, threads * 4);
  ASSERT_EQ(static_cast<int64_t>(chunks.size()), expected_chunks) << "n=" << n;
  int64_t next = 0, smallest = n, largest = 0;
  for (auto [b, e] : chunks) {
    EXPECT_EQ(b, next) << "chunks must be contiguous";
    EXPECT_LT(b, e) << "no empty chunks";
    smallest = std::min(smallest, e - b);
    largest = std::max(largest, e - b);
    next = e;
  }
  EXPECT_EQ(next, n);
  EXPECT_LE(largest - smallest, 1) << "chunks must be balanced, n=" << n;
  EXPECT_LE(static_cast<int64_t>(rec.threads.size()), std::min<int64_t>(threads, expected_chunks));
}

TEST_F(ParallelTest, StalledThreadsShareIsTakenOverByTheOthers) {
  // The caller runs chunk 0 and stalls in it (as a thread preempted by another process would);
  // the worker must take every other chunk meanwhile instead of waiting with a fixed half.
  set_num_threads(2);
  const std::thread::id caller = std::this_thread::get_id();
  struct State {
    std::thread::id caller;
    std::mutex mu;
    std::vector<std::thread::id> owner = std::vector<std::thread::id>(8);
  } st;
  st.caller = caller;
  parallel_for(
      8,
      [](void* c, int64_t begin, int64_t end) {
        auto* s = static_cast<State*>(c);
        if (begin == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
        std::lock_guard<std::mutex> lock(s->mu);
        for (int64_t i = begin; i < end; ++i) s->owner[i] = std::this_thread::get_id();
      },
      &st);
  EXPECT_EQ(st.owner[0], caller);
  for (int64_t i = 1; i < 8; ++i) EXPECT_NE(st.owner[i], caller) << "task " << i;
}

TEST_F(ParallelTest, CoversEveryIndexExactlyOnceWithBalancedChunks) {
  for (int threads : {1, 2, 3, 4, 7}) {
    set_num_threads(threads);
    ASSERT_EQ(get_num_threads(), threads);
    for (int64_t n : {1, 2, 3, 5, 7, 8, 16, 17, 100, 1001, 12345}) {
      Recorder rec(n);
      parallel_for(n, Recorder::body, &rec);
      expect_exact_balanced_cover(rec, n, threads);
    }
  }
}

TEST_F(ParallelTest, NonPositiveTaskCountDoesNothing) {
  set_num_threads(2);
  std::atomic<int> calls{0};
  auto body = [](void* c, int64_t, int64_t) { static_cast<std::atomic<int>*>(c)->fetch_add(1); };
  parallel_for(0, body, &calls);
  parallel_for(-5, body, &calls);
  EXPECT_EQ(calls.load(), 0);
}

TEST_F(ParallelTest, DefaultThreadCountIsHardwareConcurrency) {
  set_num_threads(0);
  EXPECT_GE(get_num_threads(), 1);
  EXPECT_LE(get_num_threads(), static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  set_num_threads(-3);
  EXPECT_GE(get_num_threads(), 1);
  set_num_threads(5);
  EXPECT_EQ(get_num_threads(), 5);
}

struct NestedState {
  std::atomic<int> inner_calls{0};
  std::atomic<int> wrong_thread{0};
  std::atomic<int> not_whole_range{0};
  std::atomic<int> not_in_region{0};
  std::vector<std::atomic<int>> visits = std::vector<std::atomic<int>>(4 * 50);
};

struct InnerClosure {
  NestedState* state;
  int64_t outer;
  std::thread::id outer_thread;
};

TEST_F(ParallelTest, NestedCallsRunSeriallyInline) {
  set_num_threads(3);
  NestedState state;
  EXPECT_FALSE(in_parallel_region());
  parallel_for(
      4,
      [](void* c, int64_t begin, int64_t end) {
        auto* st = static_cast<NestedState*>(c);
        if (!in_parallel_region()) st->not_in_region.fetch_add(1);
        for (int64_t o = begin; o < end; ++o) {
          InnerClosure inner{st, o, std::this_thread::get_id()};
          parallel_for(
              50,
              [](void* ic, int64_t b, int64_t e) {
                auto* in = static_cast<InnerClosure*>(ic);
                in->state->inner_calls.fetch_add(1);
                if (std::this_thread::get_id() != in->outer_thread) in->state->wrong_thread++;
                if (b != 0 || e != 50) in->state->not_whole_range++;
                for (int64_t i = b; i < e; ++i) {
                  in->state->visits[static_cast<size_t>(in->outer * 50 + i)].fetch_add(1);
                }
              },
              &inner);
        }
      },
      &state);
  EXPECT_FALSE(in_parallel_region());
  EXPECT_EQ(state.inner_calls.load(), 4);  // one inline call per outer task
  EXPECT_EQ(state.wrong_thread.load(), 0);
  EXPECT_EQ(state.not_whole_range.load(), 0);
  EXPECT_EQ(state.not_in_region.load(), 0);
  for (auto& v : state.visits) EXPECT_EQ(v.load(), 1);
}

TEST_F(ParallelTest, ConcurrentCallersAllComplete) {
  set_num_threads(2);
  constexpr int kCallers = 3;
  constexpr int kCalls = 300;
  std::atomic<int> failures{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      for (int k = 0; k < kCalls; ++k) {
        const int64_t n = 1 + (k * 7 + c) % 257;
        std::atomic<int64_t> sum{0};
        parallel_for(
            n,
            [](void* cl, int64_t b, int64_t e) {
              int64_t s = 0;
              for (int64_t i = b; i < e; ++i) s += i;
              static_cast<std::atomic<int64_t>*>(cl)->fetch_add(s);
            },
            &sum);
        if (sum.load() != n * (n - 1) / 2) failures.fetch_add(1);
      }
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST_F(ParallelTest, ResizingBetweenCallsTakesEffect) {
  for (int threads : {4, 1, 3, 2, 4}) {
    set_num_threads(threads);
    Recorder rec(64);
    parallel_for(64, Recorder::body, &rec);
    expect_exact_balanced_cover(rec, 64, threads);
    if (threads == 1) {
      ASSERT_EQ(rec.threads.size(), 1u);
      EXPECT_EQ(*rec.threads.begin(), std::this_thread::get_id());
    }
  }
}

TEST_F(ParallelTest, CallerThreadRunsTheFirstChunk) {
  set_num_threads(2);
  std::thread::id first_chunk_thread;
  parallel_for(
      10,
      [](void* c, int64_t begin, int64_t) {
        if (begin == 0) *static_cast<std::thread::id*>(c) = std::this_thread::get_id();
      },
      &first_chunk_thread);
  EXPECT_EQ(first_chunk_thread, std::this_thread::get_id());
}

// Sleeping between calls lets the workers pass their spin phase and block, which exercises the
// wake-up handshake (a lost wake-up would hang this test).
TEST_F(ParallelTest, WakesSleepingWorkers) {
  set_num_threads(2);
  for (int k = 0; k < 30; ++k) {
    Recorder rec(10);
    parallel_for(10, Recorder::body, &rec);
    expect_exact_balanced_cover(rec, 10, 2);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

TEST_F(ParallelTest, ManyBackToBackCalls) {
  set_num_threads(2);
  std::atomic<int64_t> total{0};
  for (int k = 0; k < 20000; ++k) {
    parallel_for(
        2,
        [](void* c, int64_t b, int64_t e) {
          static_cast<std::atomic<int64_t>*>(c)->fetch_add(e - b);
        },
        &total);
  }
  EXPECT_EQ(total.load(), 40000);
}

TEST_F(ParallelTest, ExceptionsPropagateToCallerAndPoolSurvives) {
  set_num_threads(3);
  for (int64_t throwing_begin : {0, 4}) {  // caller's chunk, then a worker's chunk
    EXPECT_THROW(parallel_for(
                     12,
                     [](void* c, int64_t b, int64_t) {
                       if (b == *static_cast<int64_t*>(c)) throw std::runtime_error("boom");
                     },
                     &throwing_begin),
                 std::runtime_error);
    EXPECT_FALSE(in_parallel_region());
  }
  Recorder rec(100);
  parallel_for(100, Recorder::body, &rec);
  expect_exact_balanced_cover(rec, 100, 3);
}

TEST_F(ParallelTest, CAbiEntryPoint) {
  set_num_threads(2);
  Recorder rec(33);
  tessera_parallel_for(33, Recorder::body, &rec);
  expect_exact_balanced_cover(rec, 33, 2);
}

TEST_F(ParallelTest, ChildProcessAfterForkGetsAWorkingPool) {
  set_num_threads(2);
  Recorder warm(8);
  parallel_for(8, Recorder::body, &warm);  // parent pool exists with a worker thread
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(20);  // a hang (waiting for the parent's worker, absent here) kills the child
    int64_t sum = 0;
    struct C {
      std::atomic<int64_t> s{0};
    } c;
    parallel_for(
        1000,
        [](void* cl, int64_t b, int64_t e) {
          int64_t s = 0;
          for (int64_t i = b; i < e; ++i) s += i;
          static_cast<C*>(cl)->s.fetch_add(s);
        },
        &c);
    sum = c.s.load();
    _exit(sum == 1000 * 999 / 2 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "child died (signal " << WTERMSIG(status) << ")";
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

// A host team made of plain threads, standing in for an OpenMP runtime: member(data) runs once on
// the caller and once on each of num_threads - 1 fresh threads. Counts launches.
std::atomic<int> g_team_launches{0};
void thread_team(void (*member)(void*), void* data, int num_threads) {
  g_team_launches.fetch_add(1);
  std::vector<std::thread> team;
  for (int t = 1; t < num_threads; ++t) team.emplace_back(member, data);
  member(data);
  for (auto& t : team) t.join();
}

// Installs the test team for one test and always restores Tessera's pool.
class TeamLauncherTest : public ParallelTest {
 protected:
  void SetUp() override {
    g_team_launches.store(0);
    set_team_launcher(&thread_team);
  }
  void TearDown() override {
    set_team_launcher(nullptr);
    ParallelTest::TearDown();
  }
};

TEST_F(TeamLauncherTest, LoopsRunOnTheHostTeamWithTheSameChunks) {
  ASSERT_EQ(team_launcher(), &thread_team);
  for (int threads : {2, 3}) {
    set_num_threads(threads);
    for (int64_t n : {2, 7, 100, 1001}) {
      Recorder rec(n);
      tessera_parallel_for(n, Recorder::body, &rec);  // the JIT's entry point takes the same path
      expect_exact_balanced_cover(rec, n, threads);
    }
  }
  EXPECT_EQ(g_team_launches.load(), 8);
}

TEST_F(TeamLauncherTest, SerialCasesAndNestedLoopsDoNotLaunchATeam) {
  set_num_threads(1);
  Recorder one_thread(10);
  parallel_for(10, Recorder::body, &one_thread);
  set_num_threads(2);
  Recorder one_task(1);
  parallel_for(1, Recorder::body, &one_task);
  EXPECT_EQ(g_team_launches.load(), 0);
  // A loop inside a body runs inline on the member that issued it.
  std::atomic<int64_t> inner_total{0};
  parallel_for(
      4,
      [](void* c, int64_t b, int64_t e) {
        EXPECT_TRUE(in_parallel_region());
        for (int64_t i = b; i < e; ++i) {
          parallel_for(
              5,
              [](void* c2, int64_t b2, int64_t e2) {
                static_cast<std::atomic<int64_t>*>(c2)->fetch_add(e2 - b2);
              },
              c);
        }
      },
      &inner_total);
  EXPECT_EQ(inner_total.load(), 20);
  EXPECT_EQ(g_team_launches.load(), 1);
  EXPECT_FALSE(in_parallel_region());
}

// The host's thread setting, as omp_get_max_threads reports it.
std::atomic<int> g_host_threads{3};
int host_team_size() { return g_host_threads.load(); }

TEST_F(TeamLauncherTest, UnpinnedLoopsFollowTheHostTeamSize) {
  set_team_launcher(&thread_team, &host_team_size);
  set_num_threads(0);
  for (int host : {3, 1, 2}) {
    g_host_threads.store(host);
    EXPECT_EQ(get_num_threads(), host);
    Recorder rec(100);
    parallel_for(100, Recorder::body, &rec);
    expect_exact_balanced_cover(rec, 100, host);
  }
  EXPECT_EQ(g_team_launches.load(), 2);  // a host setting of 1 runs serially
  set_num_threads(4);                    // pinned: the host's setting no longer applies
  EXPECT_EQ(get_num_threads(), 4);
  set_num_threads(0);
  g_host_threads.store(999);
  EXPECT_EQ(get_num_threads(), 999);
  set_team_launcher(nullptr);  // the own pool does not ask the host
  EXPECT_NE(get_num_threads(), 999);
}

TEST_F(TeamLauncherTest, ExceptionsPropagateAndTheOwnPoolComesBack) {
  set_num_threads(2);
  int64_t throwing_begin = 3;
  EXPECT_THROW(parallel_for(
                   8,
                   [](void* c, int64_t b, int64_t) {
                     if (b == *static_cast<int64_t*>(c)) throw std::runtime_error("boom");
                   },
                   &throwing_begin),
               std::runtime_error);
  EXPECT_FALSE(in_parallel_region());
  set_team_launcher(nullptr);
  Recorder rec(50);
  parallel_for(50, Recorder::body, &rec);
  expect_exact_balanced_cover(rec, 50, 2);
  EXPECT_EQ(g_team_launches.load(), 1);
}

}  // namespace
}  // namespace tessera::runtime
