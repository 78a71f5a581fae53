#pragma once
// A dynamic kernel: the micro-kernels a DietCode selection kept, each compiled ONCE over the
// workload's symbolic sizes, a dispatcher that picks one per call, and a fallback kernel: the
// rules' schedule compiled over the same DAG with unbounded sizes, so sizes outside the tuned
// ranges still run (untuned, never a crash, never a compile at call time). The tuner also checks
// every candidate against the fallback, so it is built once, with the candidates.
//
// Kernel ABI: buffers = the workload's inputs then outputs (as tessera::compiler::BuiltKernel),
// with each packed argument (packed_constants(): a constant input some kernel reads prepacked)
// in its input's place; sizes = one value per workload size variable, in
// DynamicWorkload::size_vars order.
#include <cstdint>
#include <memory>
#include <vector>

#include "compiler/build.h"
#include "schedule/annotation.h"
#include "tune/dynamic/dispatcher.h"
#include "tune/dynamic/packed_constants.h"
#include "tune/dynamic/workload.h"
#include "util/json.h"

namespace tessera::tune::dynamic {

// What a tuning decided, all that a later process needs to rebuild the kernel without tuning.
struct DynamicSelection {
  std::vector<schedule::KernelSchedule> schedules;  // selected micro-kernels (dispatch labels)
  Dispatcher dispatcher;
  // How the selection was made (reports; not needed to run).
  int candidates = 0;           // micro-kernels compiled and measured
  int pruned = 0;               // of them, dropped by the full-wave throughput test
  int top_k = 1;                // votes per size point of the chosen cover
  double wave_k = 1;            // fitted wave weight
  double predicted_loss = 0;    // geomean slowdown vs. the best candidate per size, minus 1
  double worst_point_loss = 0;  // largest slowdown of one size point, minus 1

  util::Json to_json() const;
  static DynamicSelection from_json(const util::Json& j);  // throws tessera::Error if malformed
};

class DynamicKernel {
 public:
  // Compiles every selected schedule once over the workload, and the fallback, all at once.
  static std::shared_ptr<const DynamicKernel> build(const DynamicWorkload& workload,
                                                    const DynamicSelection& selection);
  // One micro-kernel: `schedule` over the workload, reading the constant inputs it packs
  // prepacked.
  static std::shared_ptr<const compiler::BuiltKernel> build_micro_kernel(
      const DynamicWorkload& workload, const schedule::KernelSchedule& schedule,
      const std::string& name);
  // The fallback alone: the rules' schedule over workload.widened().
  static std::shared_ptr<const compiler::BuiltKernel> build_fallback(
      const DynamicWorkload& workload);
  // The same as build with every kernel built already (by the tuner, which measured them).
  // kernels[i] must be built from selection.schedules[i], `fallback` by build_fallback.
  static std::shared_ptr<const DynamicKernel> assemble(
      const DynamicWorkload& workload, const DynamicSelection& selection,
      std::vector<std::shared_ptr<const compiler::BuiltKernel>> kernels,
      std::shared_ptr<const compiler::BuiltKernel> fallback);

  // The selected kernel for `sizes`, or kFallback outside the tuned ranges.
  int dispatch(const int64_t* sizes) const { return selection_.dispatcher.lookup(sizes); }
  // Checked call: buffer and size counts, sizes >= 0; then the dispatched kernel's checked run.
  void run(const std::vector<void*>& buffers, const SizePoint& sizes) const;
  // Unchecked call through the raw ABI (one dispatch, one kernel call).
  void run(void** buffers, const int64_t* sizes) const;

  size_t num_kernels() const { return kernels_.size(); }
  const compiler::BuiltKernel& kernel(size_t i) const { return *kernels_.at(i); }
  const compiler::BuiltKernel& fallback_kernel() const { return *fallback_; }
  const DynamicSelection& selection() const { return selection_; }
  // The packed arguments callers make once per weight (empty: every input passed as it is).
  const PackedConstants& packed_constants() const { return packed_; }
  size_t num_sizes() const { return num_sizes_; }
  size_t num_buffers() const { return num_buffers_; }

 private:
  // Kernels numbered as in packed_: the selected ones, then the fallback.
  size_t dispatched(const int64_t* sizes) const {
    const int k = dispatch(sizes);
    return k == kFallback ? kernels_.size() : static_cast<size_t>(k);
  }
  const compiler::BuiltKernel& numbered(size_t i) const {
    return i == kernels_.size() ? *fallback_ : *kernels_[i];
  }

  DynamicSelection selection_;
  std::vector<std::shared_ptr<const compiler::BuiltKernel>> kernels_;
  std::shared_ptr<const compiler::BuiltKernel> fallback_;
  PackedConstants packed_;  // kernels_ then the fallback
  size_t num_sizes_ = 0, num_buffers_ = 0;
};

}  // namespace tessera::tune::dynamic
