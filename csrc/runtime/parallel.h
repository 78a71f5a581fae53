#pragma once
// Tessera's thread pool for parallel loops.
//
// JIT-compiled kernels call tessera_parallel_for once per parallel loop invocation, so the
// dispatch path is kept to a few atomic operations: persistent workers spin briefly for the next
// job before sleeping, the calling thread runs the first chunk itself, and work is split statically
// into one balanced contiguous chunk per thread (kernels are uniform, so dynamic scheduling would
// only add overhead).
//
// Threads: the pool has exactly get_num_threads() threads in total, the caller included (so
// num_threads - 1 workers). Keep it in step with torch.get_num_threads() to avoid
// oversubscription with ATen's pool.
//
// Re-entrancy: a parallel_for issued from inside a body runs serially inline. A parallel_for
// issued while another user thread owns the pool also runs serially inline on its own thread
// rather than waiting (never deadlocks, never oversubscribes by more than the extra caller).
// After fork(), the child process gets a fresh pool on its first parallel_for.

#include <cstdint>

namespace tessera::runtime {

// Body of a parallel loop: runs tasks [begin, end) of the loop.
// Bodies called through tessera_parallel_for must not throw. Bodies called through parallel_for
// may throw: the first exception is rethrown on the caller after all chunks finished.
using ParallelBody = void (*)(void* closure, int64_t begin, int64_t end);

// n > 0 pins the thread count. n <= 0 (the default) follows the host team's size when a launcher
// with a size query is installed (set_team_launcher: inside PyTorch, torch.set_num_threads),
// else the hardware concurrency (CPUs in this process's affinity mask). Takes effect on the next
// parallel_for (the pool is resized lazily there).
void set_num_threads(int n);
int get_num_threads();

// Runs body over [0, num_tasks) split into contiguous chunks across the pool, blocking until done.
// Nested calls (from inside a body) run serially inline. num_tasks <= 0 returns immediately.
void parallel_for(int64_t num_tasks, ParallelBody body, void* closure);

// True while the current thread is executing a parallel_for body (on a worker or the caller).
bool in_parallel_region();

// A host framework's thread team. Inside PyTorch, ATen ops run on torch's OpenMP threads; a
// second pool of Tessera threads next to them oversubscribes the cores (each pool spins while the
// other works) and slows both. A launcher hands parallel loops to the host's team instead:
// launch(member, data, num_threads) must call member(data) once on each thread of a team of up
// to num_threads threads, the calling thread included, and return when all calls have returned.
// Chunks are then taken dynamically by the team's members. nullptr restores Tessera's own pool.
// team_size (optional) says how many threads the host would use now, so that loops follow the
// host's thread setting unless set_num_threads pinned a count.
using TeamLauncher = void (*)(void (*member)(void* data), void* data, int num_threads);
using TeamSize = int (*)();
void set_team_launcher(TeamLauncher launch, TeamSize team_size = nullptr);
TeamLauncher team_launcher();

}  // namespace tessera::runtime

// C ABI entry point for JIT-compiled code. Same semantics as tessera::runtime::parallel_for; if a
// body throws anyway, the process is terminated (exceptions cannot cross JIT frames safely).
extern "C" void tessera_parallel_for(int64_t num_tasks, void (*body)(void*, int64_t, int64_t),
                                     void* closure);
