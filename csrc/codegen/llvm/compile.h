#pragma once
// Public entry of the CPU backend: loop IR in, callable machine code out.
//
//   auto k = tessera::codegen::compile_cpu(lowered_func);
//   (*k)(buffers, sizes);   // extern "C" void(void** buffers, const int64_t* sizes)
//
// Each call builds a fresh LLVM module (own LLVMContext and TargetMachine, so concurrent compiles
// on different threads are safe), optimises it with LLVM's O3 pipeline for the host CPU, emits
// object code and links it into the process-wide ORC JIT. The code is unloaded when the last
// reference to the CompiledKernel goes away.
//
// Kernel buffers must not overlap: the generated code tells LLVM that they do not (alias scopes),
// so passing one tensor as two arguments (e.g. in-place input and output) is not supported.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "codegen/llvm/host_cpu.h"
#include "loop/stmt.h"

namespace tessera::codegen {

class LoadedObject;

struct CompileOptions {
  int opt_level = 3;      // 0..3: LLVM pass pipeline and backend level (3 = O3 + Aggressive)
  bool dump_ir = false;   // print optimised IR and assembly to stderr
  bool keep_ir = false;   // keep the optimised IR text (CompiledKernel::llvm_ir)
  bool keep_asm = false;  // keep the assembly text (CompiledKernel::assembly)
};

// Wall-clock milliseconds of each compile phase.
struct CompileTimes {
  double ir_gen_ms = 0;   // loop IR -> LLVM IR (+ verification)
  double opt_ms = 0;      // LLVM optimisation pipeline
  double codegen_ms = 0;  // machine code generation
  double link_ms = 0;     // JIT linking and symbol lookup
  double total_ms = 0;
};

class CompiledKernel {
 public:
  using Fn = void (*)(void** buffers, const int64_t* sizes);

  ~CompiledKernel();
  CompiledKernel(const CompiledKernel&) = delete;
  CompiledKernel& operator=(const CompiledKernel&) = delete;

  // No argument checks here (see runtime::Kernel for the checked call).
  void operator()(void** buffers, const int64_t* sizes) const { fn_(buffers, sizes); }
  Fn fn() const { return fn_; }
  // The function as compiled: prepared for the CPU (loop/pipeline.h).
  const loop::LoweredFunc& func() const { return func_; }
  const std::string& symbol() const { return symbol_; }  // unique JIT symbol of the entry
  double compile_ms() const { return times_.total_ms; }
  const CompileTimes& compile_times() const { return times_; }
  // Optimised LLVM IR / assembly, if CompileOptions asked to keep or dump them ("" otherwise).
  std::string llvm_ir() const { return llvm_ir_; }
  std::string assembly() const { return assembly_; }
  // Loops and buffers given a different treatment from what they asked for, e.g. "vectorized
  // loop j runs as a scalar loop: <reason>" (the function's notes, then the code generator's).
  // Empty when every loop and buffer got the requested treatment.
  const std::vector<std::string>& notes() const { return notes_; }
  // Bytes of the object file linked into the JIT: what the kernel's code and data occupy there
  // (the measure caches bound themselves by).
  size_t code_bytes() const { return code_bytes_; }

 private:
  friend std::shared_ptr<CompiledKernel> compile_cpu(const loop::LoweredFunc& f,
                                                     const CompileOptions& options);
  CompiledKernel();

  loop::LoweredFunc func_;
  std::string symbol_;
  Fn fn_ = nullptr;
  CompileTimes times_;
  std::string llvm_ir_;
  std::string assembly_;
  std::vector<std::string> notes_;
  size_t code_bytes_ = 0;
  std::unique_ptr<LoadedObject> code_;
};

// Compiled kernels alive in this process (their code is mapped in the JIT until they die).
int64_t live_kernels();

// Any loop IR: a function not yet prepared for the CPU (f.cpu_ready unset, e.g. written by hand)
// goes through prepare_for_cpu first. Throws tessera::Error when `f` cannot be compiled for the
// CPU.
std::shared_ptr<CompiledKernel> compile_cpu(const loop::LoweredFunc& f,
                                            const CompileOptions& options = {});

}  // namespace tessera::codegen
