#pragma once
// Internal to the LLVM backend (not a public header): the state shared by the expression,
// memory and statement emitters (emit_expr.cc, emit_memory.cc, emit_stmt.cc), which together
// translate one LoweredFunc into LLVM IR (codegen.cc drives them).
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>

#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "codegen/llvm/host_cpu.h"
#include "ir/functor.h"
#include "loop/stmt.h"

namespace tessera::codegen::detail {

using ir::DType;
using ir::Expr;
using ir::ExprKind;
using ir::ExprNode;
using loop::Stmt;

// A value during emission: a scalar, or (inside a vectorized loop) a <lanes x T> vector when it
// differs between lanes ("varying"). Uniform values stay scalar and are splat on demand.
struct VVal {
  llvm::Value* v = nullptr;
  bool varying = false;
};

// Key of a pure operation for build-time value numbering (see Emitter::reuse).
struct VnKey {
  int op;
  llvm::Value* a;
  llvm::Value* b;
  bool operator==(const VnKey& o) const { return op == o.op && a == o.a && b == o.b; }
};
struct VnKeyHash {
  size_t operator()(const VnKey& k) const {
    size_t h = std::hash<int>()(k.op);
    h = h * 1000003u ^ std::hash<const void*>()(k.a);
    return h * 1000003u ^ std::hash<const void*>()(k.b);
  }
};

// Per LLVM function: the function being filled and what IR names mean inside it.
struct FnState {
  llvm::Function* fn = nullptr;
  llvm::BasicBlock* alloca_block = nullptr;        // the entry block: every alloca goes there
  std::unordered_map<const ExprNode*, VVal> vars;  // variable bindings
  std::unordered_map<const ir::BufferNode*, llvm::Value*> bufs;  // typed element pointers
  // Elements of the buffers allocated on this function's stack (register tiles, kStack).
  std::unordered_map<const ir::BufferNode*, int64_t> stack_elems;
  // Columns of register tiles read transposed (tile_column), per tile, with the block they were
  // computed in: valid there until the tile is stored to again.
  struct TileColumns {
    llvm::BasicBlock* block = nullptr;
    std::vector<llvm::Value*> columns;
  };
  std::unordered_map<const ir::BufferNode*, TileColumns> tile_columns;
  std::unordered_set<const ExprNode*> nonneg_vars;  // known to be >= 0
  std::unordered_set<const ExprNode*> data_vars;    // let variables holding values read from memory
  // Pure values already computed, per control-flow region: a region's values dominate the code
  // emitted inside it, and are forgotten when it ends (loop bodies, branches).
  std::vector<std::unordered_map<VnKey, llvm::Value*, VnKeyHash>> vn_scopes{1};
};

// The vectorized loop body being emitted: every statement runs for `lanes` lanes at once.
struct VecState {
  const ExprNode* var = nullptr;  // the vectorized loop variable
  int lanes = 0;
  ir::Var lane0;                // bound to the scalar value of `var` in lane 0
  llvm::Value* mask = nullptr;  // active lanes (<lanes x i1>) under varying ifs; null = all
  std::unordered_set<const ExprNode*> varying_vars;  // `var` and Let variables with varying values
  ir::VarMap varying_defs;  // varying Let variable -> definition in terms of `var`
};

class Emitter {
 public:
  Emitter(llvm::Module& module, std::string symbol, const HostCpu& cpu);

  // Emits the kernel: `symbol` (the C ABI entry) and the outlined parallel bodies it calls. `f`
  // must be prepared for the CPU (loop/pipeline.h): every vectorized loop is legal, no kUnrolled
  // or kParallel loop is left.
  void emit_kernel(const loop::LoweredFunc& f);
  // Buffers placed differently from what their scope asked (a register buffer on the heap), one
  // human-readable line each.
  const std::vector<std::string>& notes() const { return notes_; }

 private:
  // ---- types (codegen.cc) ----
  llvm::Type* value_type(DType t);    // register representation (f16/bf16 are computed in f32)
  llvm::Type* storage_type(DType t);  // in-memory element type (bool: i8, f16/bf16: i16)
  llvm::Type* shaped_like(llvm::Type* elem, llvm::Value* like);
  llvm::Function* new_function(const std::string& name, llvm::FunctionType* type, bool external);
  llvm::FunctionCallee runtime_fn(const std::string& name, llvm::FunctionType* type);
  // One alias scope per buffer (arguments and temporaries); tag_access marks a load/store (or
  // masked/gather/scatter call) as touching only its buffer's scope.
  void setup_alias_scopes(const loop::LoweredFunc& f);
  void tag_access(llvm::Value* access, const ir::Buffer& b);

  // Build-time value numbering: returns the value computed earlier for (op, a, b) in a region
  // that dominates the insertion point, or make()'s result (remembered). Unrolled loops and
  // per-statement index arithmetic repeat the same subexpressions many times; sharing them here
  // keeps the module small, which is what LLVM's compile time scales with.
  llvm::Value* reuse(int op, llvm::Value* a, llvm::Value* b,
                     const std::function<llvm::Value*()>& make);
  void push_region() { fn_->vn_scopes.emplace_back(); }
  void pop_region() { fn_->vn_scopes.pop_back(); }

  // ---- expressions (emit_expr.cc) ----
  void begin_root();                         // starts a new statement-level expression
  VVal emit_root(const Expr& e);             // begin_root() + emit(e)
  VVal emit(const Expr& e);                  // memoised within the current root
  llvm::Value* emit_uniform(const Expr& e);  // errors out if the value varies across lanes
  VVal emit_uncached(const Expr& e);
  llvm::Value* widen(const VVal& x);  // vector form (splat if uniform)
  llvm::Value* splat(llvm::Value* v);
  VVal emit_binary(const Expr& e);
  VVal emit_select(const Expr& e);
  VVal emit_call(const Expr& e);
  // index_math: the operands are computed from indices and sizes only (not from memory), so
  // i64 arithmetic on them cannot wrap in a valid program and may be marked nsw.
  llvm::Value* binop(ExprKind kind, DType t, llvm::Value* a, llvm::Value* b, const Expr& rhs,
                     bool lhs_nonneg, bool index_math);
  llvm::Value* binop_raw(ExprKind kind, DType t, llvm::Value* a, llvm::Value* b, const Expr& rhs,
                         bool lhs_nonneg, bool index_math);
  // Whether e's value depends on memory: a load, or a let variable bound to one.
  bool data_dependent(const Expr& e);
  llvm::Value* floor_divmod(bool want_div, llvm::Value* a, llvm::Value* b, const Expr& rhs,
                            bool lhs_nonneg);
  // Floor division/modulo by a divisor known to be neither 0 nor -1.
  llvm::Value* floor_divmod_nonzero(bool want_div, llvm::Value* a, llvm::Value* b,
                                    bool both_nonneg);
  llvm::Value* cast_value(llvm::Value* v, DType from, DType to);
  llvm::Value* round_to_dtype(llvm::Value* v, DType t);  // f32 value rounded to f16/bf16
  llvm::Value* libm_call(const std::string& name, const std::vector<llvm::Value*>& args);
  llvm::Value* as_bool(llvm::Value* v, DType t);
  bool known_nonneg(const Expr& e);
  bool is_varying(const Expr& e);
  bool has_load(const Expr& e);

  // ---- memory (emit_memory.cc) ----
  VVal emit_load(const Expr& e);
  void emit_store(const Stmt& s);
  void emit_prefetch(const Stmt& s);
  llvm::Value* buffer_ptr(const ir::Buffer& b);
  llvm::Value* index_i64(llvm::Value* idx, DType t);
  llvm::Value* address(llvm::Type* elem, llvm::Value* base, llvm::Value* index);  // shared GEPs
  llvm::Value* from_storage(llvm::Value* v, DType t);
  llvm::Value* to_storage(llvm::Value* v, DType t);
  Expr lane0_index(const Expr& index);
  llvm::Value* all_lanes_mask();
  // Whether a unit-stride vector at element index `first` of `buf` lies wholly inside a stack
  // buffer of this function: then its masked-off lanes are private scratch memory, and a masked
  // access can be a load and a select (off lanes 0, as a masked load gives them), or a load, a
  // select and a store, which SROA promotes to registers, unlike masked intrinsics.
  bool vector_in_stack_buffer(const ir::Buffer& buf, llvm::Value* first, int64_t lanes) const;
  // Lanes 0, s, 2s, ... of the elements from `first` on (a load with lane stride s,
  // 2 <= s <= lanes): s contiguous vector loads, masked to the elements the (active) lanes
  // read, and shuffles; see emit_memory.cc.
  llvm::Value* deinterleaved_load(llvm::FixedVectorType* vt, llvm::Value* first, int64_t stride,
                                  llvm::Align align, const ir::Buffer& buf);
  // Column `first` of a register tile of lanes x lanes elements read with lane stride `lanes`
  // (the column reads of loop/transpose_tiles.h): all columns come from one transpose of the
  // tile's row vectors, log2(lanes) rounds of two-input shuffles, kept for the other columns.
  // Null when `buf` is not such a tile or `first` is not a constant column.
  llvm::Value* tile_column(llvm::FixedVectorType* vt, const ir::Buffer& buf, llvm::Value* first,
                           llvm::Align align);
  // tile_column for a load of `buf` at `idx` with lane stride `stride`, when it reads one.
  llvm::Value* transposed_tile_read(llvm::FixedVectorType* vt, const ir::Buffer& buf,
                                    const Expr& idx, std::optional<int64_t> stride,
                                    llvm::Align align);
  // Branches to a new block, made the insertion point, that runs only when some lane of the
  // current mask is active (a lane-invariant load/store inside a varying `if` must not touch
  // memory when no lane would have). Returns the block before the branch; *merge is where the
  // caller continues after branching to it.
  llvm::BasicBlock* begin_any_lane_guard(llvm::BasicBlock** merge);

  // ---- statements (emit_stmt.cc) ----
  void emit_stmt(const Stmt& s);
  void emit_let(const Stmt& s);
  void emit_if(const Stmt& s);
  void emit_for(const Stmt& s);
  // Loop metadata that keeps LLVM's unroller and vectorisers off a loop (a fresh loop ID).
  llvm::MDNode* shaped_loop_metadata();
  // Runs `body` for `var` in [lo, lo + extent); `nonneg`: lo is known to be >= 0.
  void emit_serial_loop(const ir::Var& var, bool nonneg, const Stmt& body, llvm::Value* lo,
                        llvm::Value* extent);
  void emit_vectorized_for(const Stmt& s, llvm::Value* lo, int64_t lanes);
  void emit_parallel_call(const Stmt& s);
  void emit_allocate(const Stmt& s);

  llvm::Module& module_;
  llvm::LLVMContext& ctx_;
  llvm::IRBuilder<> b_;
  std::string symbol_;
  const HostCpu& cpu_;
  const loop::LoweredFunc* func_ = nullptr;  // the kernel being emitted
  FnState* fn_ = nullptr;
  VecState* vec_ = nullptr;
  std::vector<std::string> notes_;
  std::unordered_map<const ir::BufferNode*, std::pair<llvm::MDNode*, llvm::MDNode*>> alias_md_;
  // Per-root memo tables (cleared by begin_root), keyed by node address.
  std::unordered_map<const ExprNode*, VVal> cache_;
  std::unordered_map<const ExprNode*, bool> varying_memo_;
  std::unordered_map<const ExprNode*, bool> nonneg_memo_;
  std::unordered_map<const ExprNode*, bool> data_memo_;
  // Intrinsic properties of immutable nodes, valid for the whole kernel.
  std::unordered_map<const ExprNode*, bool> has_load_memo_;
  // Nodes the emitter creates itself (lane-0 indices) live as long as the emitter, so that no
  // memo key above can ever be reused by a different node.
  std::vector<Expr> keep_alive_;
};

}  // namespace tessera::codegen::detail
