#pragma once
// A runnable kernel: compiled code plus what a caller needs to call it safely (argument names,
// dtypes and symbolic shapes). run() checks counts and pointers and reports mistakes as
// tessera::Error instead of letting the JIT-compiled code crash; run-time errors the kernel
// detects itself (integer division by zero) are raised the same way.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "codegen/llvm/compile.h"
#include "ir/buffer.h"
#include "loop/stmt.h"

namespace tessera::runtime {

// One buffer argument of a kernel, in ABI order.
struct KernelArg {
  std::string name;
  ir::DType dtype = ir::DType::kFloat32;
  std::vector<ir::Expr> shape;  // may mention the kernel's size variables
};

class Kernel {
 public:
  explicit Kernel(std::shared_ptr<const codegen::CompiledKernel> compiled);

  // Compiles `f` for the CPU (see codegen::compile_cpu).
  static Kernel compile(const loop::LoweredFunc& f, const codegen::CompileOptions& options = {});

  const std::string& name() const { return compiled_->func().name; }
  const std::vector<KernelArg>& args() const { return args_; }
  const std::vector<ir::Var>& size_vars() const { return compiled_->func().size_vars; }
  const codegen::CompiledKernel& compiled() const { return *compiled_; }
  double compile_ms() const { return compiled_->compile_ms(); }

  // Checked call: one data pointer per argument (non-null unless the buffer is empty), one value
  // per size variable, each within the variable's declared [lo, hi] range.
  void run(const std::vector<void*>& buffers, const std::vector<int64_t>& sizes) const;
  // Unchecked call through the raw ABI (`buffers` as args(): without the status word, which
  // this supplies). Both calls throw tessera::Error when the kernel reports a run-time error.
  void run_unchecked(void** buffers, const int64_t* sizes) const;

  // Concrete shape / element count of every argument for the given size values (throws
  // tessera::Error on a wrong number of sizes or a negative dimension).
  std::vector<std::vector<int64_t>> arg_shapes(const std::vector<int64_t>& sizes) const;
  std::vector<int64_t> arg_numels(const std::vector<int64_t>& sizes) const;

 private:
  void check_sizes(const std::vector<int64_t>& sizes) const;

  std::shared_ptr<const codegen::CompiledKernel> compiled_;
  std::vector<KernelArg> args_;  // the function's arguments less the status word
  bool has_status_ = false;
};

}  // namespace tessera::runtime
