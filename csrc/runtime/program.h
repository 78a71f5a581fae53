#pragma once
// A compiled graph segment executed from C++: Tessera kernels run back to back over a buffer
// table. Inputs and outputs are the caller's memory; intermediates live in one arena laid out
// once by liveness, so intermediates whose lifetimes do not overlap share memory and a call
// allocates nothing.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "runtime/kernel.h"

namespace tessera::runtime {

struct ProgramBuffer {
  enum class Kind { kInput, kOutput, kTemp };
  Kind kind = Kind::kTemp;
  int io_index = -1;  // position among the program's inputs or outputs
  int64_t bytes = 0;
};

struct ProgramStep {
  std::shared_ptr<const Kernel> kernel;
  std::vector<int> buffers;    // program buffer ids, in the kernel's argument order
  std::vector<int64_t> sizes;  // values of the kernel's size variables
};

// Offsets (64-byte aligned) of buffers with the given sizes and [first, last] step lifetimes in
// one arena: largest first, each at the lowest offset that overlaps no placed buffer alive at
// the same time. `total` receives the arena size.
std::vector<int64_t> plan_arena(const std::vector<int64_t>& bytes,
                                const std::vector<std::pair<int, int>>& lifetimes, int64_t* total);

// The data pointers of one program call (inputs then outputs), gathered by the caller: on the
// stack when there are few, so that a call allocates nothing.
class CallPointers {
 public:
  explicit CallPointers(size_t n) : ptrs_(small_) {
    if (n > kSmall) {
      large_.resize(n);
      ptrs_ = large_.data();
    }
  }
  CallPointers(const CallPointers&) = delete;
  CallPointers& operator=(const CallPointers&) = delete;

  void*& operator[](size_t i) { return ptrs_[i]; }
  void* const* data() const { return ptrs_; }

 private:
  static constexpr size_t kSmall = 32;
  void* small_[kSmall];
  std::vector<void*> large_;
  void** ptrs_;
};

class Program {
 public:
  // Checks every step against its kernel (argument count, buffer sizes) and plans the arena.
  // Every input and output index in [0, count) must name exactly one buffer.
  Program(std::vector<ProgramBuffer> buffers, std::vector<ProgramStep> steps);

  int num_inputs() const { return num_inputs_; }
  int num_outputs() const { return num_outputs_; }
  int num_steps() const { return static_cast<int>(steps_.size()); }
  int64_t arena_bytes() const { return arena_bytes_; }
  // Bytes the intermediates would take without sharing (for reports).
  int64_t temp_bytes() const;
  int64_t offset_of(int buffer) const { return offsets_.at(static_cast<size_t>(buffer)); }

  // Runs every step. Thread-safe (calls are serialised: they share the arena and the argument
  // table).
  void run(const std::vector<void*>& inputs, const std::vector<void*>& outputs);
  // The same on raw arrays of num_inputs() and num_outputs() pointers: the per-call path of the
  // Python runner, which allocates nothing.
  void run_raw(void* const* inputs, void* const* outputs);

 private:
  std::vector<ProgramBuffer> buffers_;
  std::vector<ProgramStep> steps_;
  std::vector<int64_t> offsets_;  // arena offset per temp buffer (-1 for inputs/outputs)
  int64_t arena_bytes_ = 0;
  int num_inputs_ = 0, num_outputs_ = 0;
  std::unique_ptr<std::byte[], void (*)(std::byte*)> arena_{nullptr, nullptr};
  // Every step's kernel arguments, back to back (step s starts at arg_begin_[s]). Temps point
  // into the arena once and for all; a call only patches the slots of inputs and outputs.
  std::vector<void*> args_;
  std::vector<size_t> arg_begin_;
  std::vector<std::vector<size_t>> input_slots_, output_slots_;
  std::vector<int64_t> input_bytes_, output_bytes_;
  std::mutex mutex_;
};

}  // namespace tessera::runtime
