#pragma once
// Shadow memory for the GPU-semantics interpreter (interpreter.h): which thread last wrote and
// last read each element, and in which phase (a stretch of a block's execution between two
// barriers), to report data races and reads of shared memory the block never wrote.
//
// Two accesses of one element race when they come from different threads, at least one writes,
// and nothing orders them: for shared memory, they fall in the same phase of the block (a
// barrier orders everything before it against everything after it); for global memory, they
// also race when the threads are in different blocks (blocks are never ordered within a launch).
// Phases are numbered across the whole launch, so equal phases mean the same block.
//
// Per element the shadow keeps the last writer and the last two distinct readers: a write that
// conflicts with any earlier reader of its element is found as long as that reader is one of the
// two most recent, which covers the patterns schedules produce (a read-only operand is never
// written; a shared tile is rewritten only after a barrier).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/buffer.h"

namespace tessera::loop {

// Who accesses: a thread of a block, in a phase. thread -1: code outside any thread loop.
struct GpuActor {
  int64_t block = -1;
  int64_t thread = -1;
  int64_t phase = -1;
};

// What the checks found over one launch.
struct GpuCheckReport {
  int64_t races = 0;          // accesses racing with an earlier access (counted once per access)
  int64_t out_of_bounds = 0;  // reads and writes outside their buffer (skipped; reads give 0)
  // Reads of shared memory no thread of the block has written yet (garbage on a GPU).
  int64_t uninitialized_reads = 0;
  std::vector<std::string> messages;  // the first kMaxMessages findings, one line each
  static constexpr size_t kMaxMessages = 16;

  bool clean() const { return races == 0 && out_of_bounds == 0 && uninitialized_reads == 0; }
  void note(const std::string& message);
};

class RaceChecker {
 public:
  explicit RaceChecker(GpuCheckReport* report) : report_(report) {}

  // Element `index` of `b` (shared or global scope; others are private to a thread and ignored)
  // accessed by `who`. `index` must be in bounds.
  void access(const ir::BufferNode& b, int64_t index, bool write, const GpuActor& who);

  // A new block starts: the previous block's shared memory is gone.
  void begin_block();

 private:
  struct Shadow {
    GpuActor writer;
    GpuActor readers[2];
  };
  std::vector<Shadow>& shadow_of(const ir::BufferNode& b, int64_t index);
  void report(const ir::BufferNode& b, int64_t index, bool write, const GpuActor& who,
              const GpuActor& other, bool other_wrote);

  GpuCheckReport* report_;
  std::map<const ir::BufferNode*, std::vector<Shadow>> shadows_;
};

}  // namespace tessera::loop
