#pragma once
// Loop IR -> LLVM IR for the host CPU.
//
// The module holds `symbol` with the kernel ABI
//   extern "C" void symbol(void** buffers, const int64_t* sizes)
// which unpacks its arguments and calls an internal function taking one noalias pointer per
// buffer (so LLVM knows kernel buffers do not alias) and the sizes as i64 values. Parallel loop
// bodies are outlined into internal functions called through tessera_parallel_for.
#include <llvm/IR/Module.h>

#include <string>

#include "loop/stmt.h"

namespace tessera::codegen {

// Emits `f` into `module` (whose data layout and triple the caller has set) and verifies it; no
// optimisation. Throws tessera::Error for IR the CPU backend cannot compile (kAccess in loop IR,
// GPU loop kinds, unbound variables, ...).
void build_llvm_module(const loop::LoweredFunc& f, const std::string& symbol, llvm::Module& module);

}  // namespace tessera::codegen
