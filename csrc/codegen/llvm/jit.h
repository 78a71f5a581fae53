#pragma once
// The process-wide ORC JIT that holds every compiled kernel.
//
// Kernels are optimised and turned into object code by the caller (compile.cc), each with its own
// LLVMContext and TargetMachine, so compiles on different threads never share LLVM state; the JIT
// only links finished objects. Each object gets its own ResourceTracker, so a kernel's code is
// freed as soon as its LoadedObject goes away.
#include <llvm/ExecutionEngine/Orc/Core.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Target/TargetMachine.h>

#include <cstdint>
#include <memory>
#include <string>

namespace tessera::codegen {

// A TargetMachine for the host CPU with Tessera's settings (all host features, FP contraction
// allowed, CodeGenOpt::Aggressive for opt_level >= 3). Not thread-safe: create one per compile.
std::unique_ptr<llvm::TargetMachine> create_host_target_machine(int opt_level);

// Code linked into the JIT; unlinks and frees it on destruction.
class LoadedObject {
 public:
  explicit LoadedObject(llvm::orc::ResourceTrackerSP tracker) : tracker_(std::move(tracker)) {}
  ~LoadedObject();
  LoadedObject(const LoadedObject&) = delete;
  LoadedObject& operator=(const LoadedObject&) = delete;

  // Address of an exported symbol of this object (throws tessera::Error when missing).
  uint64_t lookup(const std::string& symbol) const;

 private:
  llvm::orc::ResourceTrackerSP tracker_;
};

// Links an object file into the process-wide JIT. Its external references resolve to the runtime
// symbols (runtime_symbols.h) and, failing that, to symbols of the current process.
std::unique_ptr<LoadedObject> jit_load_object(std::unique_ptr<llvm::MemoryBuffer> object);

}  // namespace tessera::codegen
