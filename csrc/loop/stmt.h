#pragma once
// Loop IR: the imperative program a schedule lowers to, and what code generators consume.
//
// Expressions are ir::Expr (with kLoad reading flat buffer elements). Statements are immutable
// nodes with a kind tag, like expressions. Semantics the code generators rely on:
//  - For: `var` runs over [min, min + extent). kParallel loops are distributed over the thread
//    pool (the body must be race-free across iterations). kVectorized loops must have a constant
//    extent (the vector width); their body is executed lane-wise in SIMD registers. kUnrolled
//    loops with a constant extent are fully unrolled (accumulator tiles rely on constant indices).
//  - Store writes buffer[index] = value (flat element index).
//  - Allocate introduces a temporary buffer visible in `body`; kRegister/kStack buffers need a
//    constant size.
//  - Prefetch hints that buffer[index] will be read soon (`cache_level` 1: into L1, 2: into L2).
//    It has no effect on results, and the index may lie outside the buffer (it never faults).
//  - ParallelCall runs the function's outlined body number `callee` (LoweredFunc::outlined) for
//    every `var` in [min, min + extent), distributed over the thread pool: a kParallel loop
//    after outline_parallel_loops (loop/outline_parallel.h).
//  - GPU-bound For kinds (kGpuBlock*, kGpuThread*) are not loops on the device: the kernel runs
//    once per (block, thread) and `var` is the hardware index (blockIdx.x, threadIdx.x, ...).
//    Their `min` must be 0 and their extents set the launch grid; only the CUDA code generator
//    accepts them (the CPU one refuses them).
//  - Barrier (__syncthreads on CUDA) makes every thread of a block wait until all have reached
//    it; shared-scope writes before it are visible to the whole block after it. It must be
//    reached by every thread of the block (never under a thread-dependent condition).
#include <memory>
#include <string>
#include <vector>

#include "ir/buffer.h"
#include "ir/expr.h"

namespace tessera::loop {

using ir::Buffer;
using ir::Expr;
using ir::Var;

enum class ForKind : uint8_t {
  kSerial,
  kParallel,
  kVectorized,
  kUnrolled,
  kGpuBlockX,
  kGpuBlockY,
  kGpuBlockZ,
  kGpuThreadX,
  kGpuThreadY,
  kGpuThreadZ,
};
const char* for_kind_name(ForKind k);

enum class StmtKind : uint8_t {
  kFor,
  kLet,
  kIf,
  kStore,
  kAllocate,
  kSeq,
  kNop,
  kPrefetch,
  kParallelCall,
  kBarrier,
};

struct StmtNode;
using Stmt = std::shared_ptr<const StmtNode>;

struct StmtNode {
  StmtKind kind;
  // kFor: var, min, extent, for_kind, body. kLet: var, value, body.
  // kParallelCall: var, min, extent, callee.
  Var var;
  Expr min;
  Expr extent;
  ForKind for_kind = ForKind::kSerial;
  Expr value;  // kLet value; kStore value
  // kIf: cond, then_case, else_case (may be null).
  Expr cond;
  Stmt then_case;
  Stmt else_case;
  Stmt body;  // kFor, kLet, kAllocate
  // kStore: buffer[index] = value. kAllocate: buffer. kPrefetch: buffer[index], cache_level.
  Buffer buffer;
  Expr index;
  int cache_level = 0;
  std::vector<Stmt> seq;  // kSeq
  int callee = -1;        // kParallelCall: index into LoweredFunc::outlined
};

Stmt make_for(Var var, Expr min, Expr extent, ForKind kind, Stmt body);
Stmt make_let(Var var, Expr value, Stmt body);
Stmt make_if(Expr cond, Stmt then_case, Stmt else_case = nullptr);
Stmt make_store(Buffer buffer, Expr index, Expr value);
Stmt make_allocate(Buffer buffer, Stmt body);
Stmt make_prefetch(Buffer buffer, Expr index, int cache_level);
Stmt make_parallel_call(Var var, Expr min, Expr extent, int callee);
Stmt make_seq(std::vector<Stmt> stmts);  // flattens nested sequences, drops nops
Stmt make_nop();
Stmt make_barrier();  // block-wide barrier (GPU only)

// Whether `k` binds its loop to a GPU block or thread index.
bool is_gpu_bound(ForKind k);

// The body of a parallel loop moved into a function of its own (loop/outline_parallel.h). It runs
// for one value of `var` and reads, from the function that calls it, exactly the buffers
// `buffers` and the variables `vars` (its captures, in the order a closure stores them).
struct OutlinedBody {
  std::string name;  // unique within the LoweredFunc
  Var var;
  std::vector<Buffer> buffers;
  std::vector<Var> vars;
  Stmt body;
};

// A kernel: its buffer arguments (in ABI order) and the size variables it reads at run time.
// ABI of the compiled function: extern "C" void f(void** buffers, const int64_t* sizes), where
// buffers[i] is the data pointer of args[i] and sizes[j] the value of size_vars[j].
struct LoweredFunc {
  std::string name;
  std::vector<Buffer> args;
  std::vector<Var> size_vars;
  Stmt body;
  // When set, the last arg (named kStatusArg, int32[1]) is a status word the kernel sets to a
  // non-zero value on a run-time error (an integer division by zero: guard_division.h).
  // runtime::Kernel supplies it, hides it from callers and raises when it is set.
  bool has_status = false;
  static constexpr const char* kStatusArg = "__status";
  // Parallel loop bodies, called by the kParallelCall statements of `body`.
  std::vector<OutlinedBody> outlined;
  // Loops the passes could not give the treatment their kind asks for, one line each (e.g. a
  // vectorized loop whose body cannot run lane-wise, and why).
  std::vector<std::string> notes;
  // Set by prepare_for_cpu (loop/pipeline.h): vectorized loops are legal, unrolled loops are
  // expanded and parallel loops outlined, which is the form the CPU code generator translates.
  bool cpu_ready = false;
};

}  // namespace tessera::loop
