#pragma once
// Loop IR -> LLVM IR for the host CPU.
//
// The module holds `symbol` with the kernel ABI
//   extern "C" void symbol(void** buffers, const int64_t* sizes)
// whose body is the whole kernel. Buffers never overlap: every load and store carries alias-scope
// metadata (one scope per buffer), which gives LLVM the same facts as noalias pointer parameters
// would (inlining a function with noalias parameters produces exactly this metadata) without a
// separate body function that the pipeline would optimise twice. Outlined parallel bodies
// (LoweredFunc::outlined) become internal functions called through tessera_parallel_for.
#include <llvm/IR/Module.h>

#include <string>
#include <vector>

#include "loop/stmt.h"

namespace tessera::codegen {

// Emits `f`, prepared for the CPU (loop/pipeline.h), into `module` (whose data layout and triple
// the caller has set) and verifies it; no optimisation. Throws tessera::Error for IR the CPU
// backend cannot compile (kAccess in loop IR, GPU loop kinds, unbound variables, ...). Returns
// notes on buffers placed differently from what their scope asked (e.g. a register buffer too
// large for the stack).
std::vector<std::string> build_llvm_module(const loop::LoweredFunc& f, const std::string& symbol,
                                           llvm::Module& module);

}  // namespace tessera::codegen
