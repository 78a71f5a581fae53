#pragma once
// Building one CPU kernel: stage plan + schedule -> loop IR -> LLVM JIT. No tuning and no
// policy here (compiler/compile.h decides which schedule to build); the tuners' measurer and the
// compile call build every kernel through build_cpu, so each kernel is planned and JIT-compiled
// exactly where util/counters.h counts it.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "codegen/llvm/compile.h"
#include "ir/tensor.h"
#include "loop/stmt.h"
#include "runtime/kernel.h"
#include "runtime/ndarray.h"
#include "schedule/annotation.h"
#include "schedule/default_schedule.h"
#include "schedule/stage_plan.h"

namespace tessera::compiler {

struct BuildOptions {
  std::string name = "kernel";
  std::optional<schedule::KernelSchedule> schedule;  // default schedule when empty
  std::optional<schedule::Target> target;            // host target when empty
  codegen::CompileOptions codegen;
  // Names of inputs whose values stay the same between calls (weights): those the schedule packs
  // are read prepacked (schedule::prepackable_inputs), each with its pack kernel in prepacks().
  std::vector<std::string> constant_inputs;
};

// The kernel that packs one prepacked input (schedule/prepack.h) before the main kernel reads it.
struct Prepack {
  int input = -1;  // position among the plan's inputs (and the main kernel's arguments)
  std::shared_ptr<const runtime::Kernel> kernel;  // ABI: the input, then its packed copy
};

class BuiltKernel {
 public:
  // buffers: inputs then outputs, as in the plan (a prepacked input's packed copy in its place);
  // sizes: values of func().size_vars.
  void run(void** buffers, const int64_t* sizes) const;
  void run(const std::vector<void*>& buffers, const std::vector<int64_t>& sizes) const;

  const schedule::StagePlan& plan() const { return plan_; }
  const schedule::KernelSchedule& schedule() const { return schedule_; }
  const loop::LoweredFunc& func() const { return func_; }
  double lower_ms() const { return lower_ms_; }
  double jit_ms() const { return kernel_->compile_ms(); }
  // The runnable kernel (checked calls, argument shapes); shared so programs can hold it.
  const std::shared_ptr<const runtime::Kernel>& kernel() const { return kernel_; }
  // Inputs read packed, in input order, each with the kernel that packs it (empty: none).
  const std::vector<Prepack>& prepacks() const { return prepacks_; }
  // Packs each prepacked input from its plain data at (*buffers)[input] into a new array and
  // points (*buffers)[input] at that copy (buffers: the run ABI). The arrays returned must
  // outlive every run over `buffers`.
  std::vector<runtime::NDArray> pack_prepacked(std::vector<void*>* buffers) const;

 private:
  friend BuiltKernel build_cpu(const schedule::StagePlan&, const schedule::KernelSchedule&,
                               const std::string&, const codegen::CompileOptions&,
                               const std::vector<std::string>&);
  schedule::StagePlan plan_;
  schedule::KernelSchedule schedule_;
  loop::LoweredFunc func_;
  std::shared_ptr<const runtime::Kernel> kernel_;
  std::vector<Prepack> prepacks_;
  double lower_ms_ = 0;
};

// Lowers and JIT-compiles `plan` with `schedule` (one lowering, one JIT compile, plus one of each
// per prepacked input); `plan` must have been made with the schedule's plan choices
// (tune::Task::plan_for). `prepacked`: inputs read already packed (schedule::prepackable_inputs).
BuiltKernel build_cpu(const schedule::StagePlan& plan, const schedule::KernelSchedule& schedule,
                      const std::string& name = "kernel",
                      const codegen::CompileOptions& codegen = {},
                      const std::vector<std::string>& prepacked = {});

// Plans the DAG of `outputs` with options.schedule's plan choices, then builds it with
// options.schedule (default: the rules' plan and schedule for options.target or the host),
// reading the constant inputs it packs prepacked.
BuiltKernel build_cpu(const std::vector<ir::Tensor>& outputs, const std::vector<ir::Tensor>& inputs,
                      const BuildOptions& options = {});

}  // namespace tessera::compiler
