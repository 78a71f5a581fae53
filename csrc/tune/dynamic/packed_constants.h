#pragma once
// The packed arguments of a dynamic kernel's constant inputs (weights). Each of its kernels
// (micro-kernels and fallback) reads a constant input it packs prepacked, and two kernels may pack
// it into different panels. The caller keeps one packed argument per constant input that some
// kernel packs, made once by pack() (again when the weight changes) and passed in the input's
// place; it holds one segment per distinct packed layout, plus a plain copy when some kernel
// reads the input as it is. Before a call, point() moves each such argument to the segment the
// dispatched kernel reads. Constant inputs no kernel packs are not arguments: passed as they are.
#include <cstdint>
#include <memory>
#include <vector>

#include "compiler/build.h"
#include "runtime/kernel.h"

namespace tessera::tune::dynamic {

// One layout's slice of a packed argument.
struct PackSegment {
  std::shared_ptr<const runtime::Kernel> pack;  // writes the segment; null: a plain copy
  int64_t offset_bytes = 0;                     // from the argument's start, 64-byte aligned
  int64_t bytes = 0;
};

struct PackedArgument {
  int input = -1;     // position among the workload's inputs
  int64_t bytes = 0;  // size of the whole argument
  int64_t numel = 0;  // the same in elements of the input's dtype (rounded up)
  std::vector<PackSegment> segments;
};

class PackedConstants {
 public:
  PackedConstants() = default;
  // The arguments for `kernels` (each built over the same inputs, in the same order), whose
  // constant inputs are `constant_inputs` (positions).
  static PackedConstants plan(const std::vector<const compiler::BuiltKernel*>& kernels,
                              const std::vector<int>& constant_inputs);

  bool empty() const { return arguments_.empty(); }
  const std::vector<PackedArgument>& arguments() const { return arguments_; }
  // Writes the packed argument of input `input` (plain data at `src`) to `dst`, which holds
  // its `bytes` and is 64-byte aligned. Throws tessera::Error if `input` is not an argument.
  void pack(int input, const void* src, void* dst) const;
  // Moves each packed argument among `buffers` (the kernels' ABI: inputs, then outputs) to the
  // segment kernel `kernel` (its index in plan's `kernels`) reads.
  void point(size_t kernel, void** buffers) const {
    const std::vector<int64_t>& offsets = offsets_[kernel];
    for (size_t a = 0; a < arguments_.size(); ++a) {
      void*& b = buffers[arguments_[a].input];
      b = static_cast<char*>(b) + offsets[a];
    }
  }

 private:
  std::vector<PackedArgument> arguments_;
  std::vector<std::vector<int64_t>> offsets_;  // [kernel][argument]: its segment's offset
};

}  // namespace tessera::tune::dynamic
