// Statements: lets, ifs (branches, or lane masks when the condition varies), serial and
// vectorized loops, parallel calls of outlined bodies, and allocations. The loop IR arrives
// prepared (loop/pipeline.h): which loops vectorize, unroll or run in parallel is decided there.
#include <llvm/IR/Intrinsics.h>

#include "codegen/llvm/emitter.h"
#include "ir/buffer.h"
#include "loop/scalar_loops.h"
#include "util/check.h"

namespace tessera::codegen::detail {

namespace {

// Largest kStack/kRegister buffer placed on the stack; bigger ones go to the heap, since pool
// threads have ordinary (8 MiB) stacks and a kernel may nest several such buffers.
constexpr int64_t kMaxStackBytes = 256 * 1024;

// Restores a variable binding (and its non-negativity) when a scope ends.
class ScopedBinding {
 public:
  ScopedBinding(FnState* fn, const ExprNode* var, VVal value, bool nonneg, bool data)
      : fn_(fn), var_(var) {
    auto it = fn->vars.find(var);
    had_ = it != fn->vars.end();
    if (had_) old_ = it->second;
    had_nonneg_ = fn->nonneg_vars.count(var) > 0;
    had_data_ = fn->data_vars.count(var) > 0;
    fn->vars[var] = value;
    mark(fn->nonneg_vars, nonneg);
    mark(fn->data_vars, data);
  }
  ~ScopedBinding() {
    if (had_) {
      fn_->vars[var_] = old_;
    } else {
      fn_->vars.erase(var_);
    }
    mark(fn_->nonneg_vars, had_nonneg_);
    mark(fn_->data_vars, had_data_);
  }
  ScopedBinding(const ScopedBinding&) = delete;
  ScopedBinding& operator=(const ScopedBinding&) = delete;

 private:
  FnState* fn_;
  const ExprNode* var_;
  VVal old_;
  bool had_ = false;
  bool had_nonneg_ = false;
  bool had_data_ = false;

  void mark(std::unordered_set<const ExprNode*>& set, bool member) const {
    if (member) {
      set.insert(var_);
    } else {
      set.erase(var_);
    }
  }
};

}  // namespace

void Emitter::emit_stmt(const Stmt& s) {
  TESSERA_CHECK(s != nullptr) << "null statement in loop IR";
  switch (s->kind) {
    case loop::StmtKind::kNop:
      return;
    case loop::StmtKind::kSeq:
      for (const Stmt& c : s->seq) emit_stmt(c);
      return;
    case loop::StmtKind::kStore:
      emit_store(s);
      return;
    case loop::StmtKind::kLet:
      emit_let(s);
      return;
    case loop::StmtKind::kIf:
      emit_if(s);
      return;
    case loop::StmtKind::kFor:
      emit_for(s);
      return;
    case loop::StmtKind::kAllocate:
      emit_allocate(s);
      return;
    case loop::StmtKind::kPrefetch:
      emit_prefetch(s);
      return;
    case loop::StmtKind::kParallelCall:
      emit_parallel_call(s);
      return;
    case loop::StmtKind::kBarrier:
      TESSERA_FAIL() << "a barrier is a GPU statement the CPU code generator cannot compile";
  }
  TESSERA_FAIL() << "unknown statement kind";
}

void Emitter::emit_let(const Stmt& s) {
  TESSERA_CHECK(s->var.defined() && s->var->is_var()) << "Let needs a variable";
  VVal v = emit_root(s->value);
  if (s->var->dtype != s->value->dtype) {
    v.v = cast_value(v.v, s->value->dtype, s->var->dtype);
  }
  bool nonneg = ir::is_int(s->var->dtype) && known_nonneg(s->value);
  ScopedBinding bind(fn_, s->var.get(), v, nonneg, data_dependent(s->value));
  if (vec_ != nullptr && v.varying) {
    const ExprNode* key = s->var.get();
    bool was_varying = vec_->varying_vars.count(key) > 0;
    auto old_def = vec_->varying_defs.find(key);
    bool had_def = old_def != vec_->varying_defs.end();
    Expr saved_def = had_def ? old_def->second : Expr();
    Expr def = ir::substitute(s->value, vec_->varying_defs);
    vec_->varying_vars.insert(key);
    vec_->varying_defs[key] = def;
    emit_stmt(s->body);
    if (!was_varying) vec_->varying_vars.erase(key);
    if (had_def) {
      vec_->varying_defs[key] = saved_def;
    } else {
      vec_->varying_defs.erase(key);
    }
    return;
  }
  if (vec_ != nullptr && vec_->varying_vars.count(s->var.get()) > 0) {
    // A uniform rebinding of a name that was varying in an enclosing scope.
    vec_->varying_vars.erase(s->var.get());
    Expr saved_def = vec_->varying_defs[s->var.get()];
    vec_->varying_defs.erase(s->var.get());
    emit_stmt(s->body);
    vec_->varying_vars.insert(s->var.get());
    vec_->varying_defs[s->var.get()] = saved_def;
    return;
  }
  emit_stmt(s->body);
}

void Emitter::emit_if(const Stmt& s) {
  VVal c = emit_root(s->cond);
  llvm::Value* cv = as_bool(c.v, s->cond->dtype);
  if (!c.varying) {
    llvm::BasicBlock* then_bb = llvm::BasicBlock::Create(ctx_, "if.then", fn_->fn);
    llvm::BasicBlock* else_bb =
        s->else_case ? llvm::BasicBlock::Create(ctx_, "if.else", fn_->fn) : nullptr;
    llvm::BasicBlock* merge_bb = llvm::BasicBlock::Create(ctx_, "if.end", fn_->fn);
    b_.CreateCondBr(cv, then_bb, else_bb ? else_bb : merge_bb);
    b_.SetInsertPoint(then_bb);
    push_region();
    if (s->then_case) emit_stmt(s->then_case);
    pop_region();
    b_.CreateBr(merge_bb);
    if (else_bb) {
      b_.SetInsertPoint(else_bb);
      push_region();
      emit_stmt(s->else_case);
      pop_region();
      b_.CreateBr(merge_bb);
    }
    b_.SetInsertPoint(merge_bb);
    return;
  }
  // Varying condition: both branches run, each with its lanes masked.
  llvm::Value* outer = vec_->mask;
  llvm::Value* not_c = b_.CreateNot(cv);
  llvm::Value* then_mask = outer ? b_.CreateAnd(outer, cv) : cv;
  llvm::Value* else_mask = outer ? b_.CreateAnd(outer, not_c) : not_c;
  vec_->mask = then_mask;
  if (s->then_case) emit_stmt(s->then_case);
  if (s->else_case) {
    vec_->mask = else_mask;
    emit_stmt(s->else_case);
  }
  vec_->mask = outer;
}

void Emitter::emit_for(const Stmt& s) {
  switch (s->for_kind) {
    case loop::ForKind::kSerial:
    case loop::ForKind::kVectorized:
      break;
    case loop::ForKind::kParallel:
    case loop::ForKind::kUnrolled:
      TESSERA_FAIL() << "internal error: " << loop::for_kind_name(s->for_kind) << " loop "
                     << s->var->name
                     << " reached the code generator (prepare_for_cpu removes them)";
    default:
      TESSERA_FAIL() << "loop " << s->var->name << " is bound to "
                     << loop::for_kind_name(s->for_kind)
                     << ", a GPU loop kind the CPU code generator cannot compile";
  }
  TESSERA_CHECK(ir::is_int(s->var->dtype))
      << "loop variable " << s->var->name << " must be an integer";
  TESSERA_CHECK(s->min.defined() && s->extent.defined())
      << "loop " << s->var->name << " needs a min and an extent";
  llvm::Type* it = value_type(s->var->dtype);
  // The bounds are separate statement-level expressions, evaluated once before the loop.
  begin_root();
  llvm::Value* lo = b_.CreateSExtOrTrunc(emit_uniform(s->min), it);
  begin_root();
  llvm::Value* extent = b_.CreateSExtOrTrunc(emit_uniform(s->extent), it);
  if (s->for_kind == loop::ForKind::kVectorized) {
    auto* lanes = llvm::dyn_cast<llvm::ConstantInt>(extent);
    TESSERA_CHECK(lanes != nullptr && vec_ == nullptr)
        << "internal error: vectorized loop " << s->var->name
        << " is not legal (legalize_vectorized_loops keeps only legal ones)";
    emit_vectorized_for(s, lo, lanes->getSExtValue());
    return;
  }
  emit_serial_loop(s->var, known_nonneg(s->min), s->body, lo, extent);
}

void Emitter::emit_serial_loop(const ir::Var& var, bool nonneg, const Stmt& body, llvm::Value* lo,
                               llvm::Value* extent) {
  llvm::Type* it = lo->getType();
  auto* const_extent = llvm::dyn_cast<llvm::ConstantInt>(extent);
  if (const_extent && const_extent->getSExtValue() <= 0) return;
  if (const_extent && const_extent->getSExtValue() == 1) {
    ScopedBinding bind(fn_, var.get(), {lo, false}, nonneg, false);
    emit_stmt(body);
    return;
  }
  llvm::BasicBlock* pre = b_.GetInsertBlock();
  llvm::BasicBlock* body_bb = llvm::BasicBlock::Create(ctx_, "for." + var->name, fn_->fn);
  llvm::BasicBlock* exit_bb = llvm::BasicBlock::Create(ctx_, "for.end", fn_->fn);
  // Bottom-tested loop behind a guard: the form LLVM's loop passes expect after rotation.
  if (const_extent) {
    b_.CreateBr(body_bb);
  } else {
    b_.CreateCondBr(b_.CreateICmpSGT(extent, llvm::ConstantInt::get(it, 0)), body_bb, exit_bb);
  }
  b_.SetInsertPoint(body_bb);
  llvm::PHINode* iv = b_.CreatePHI(it, 2, var->name + ".iv");
  iv->addIncoming(llvm::ConstantInt::get(it, 0), pre);
  llvm::Value* value = b_.CreateNSWAdd(lo, iv, var->name);
  {
    ScopedBinding bind(fn_, var.get(), {value, false}, nonneg, false);
    push_region();
    emit_stmt(body);
    pop_region();
  }
  llvm::Value* next = b_.CreateAdd(iv, llvm::ConstantInt::get(it, 1), "", /*HasNUW=*/true,
                                   /*HasNSW=*/true);
  iv->addIncoming(next, b_.GetInsertBlock());
  llvm::BranchInst* latch = b_.CreateCondBr(b_.CreateICmpSLT(next, extent), body_bb, exit_bb);
  if (loop::contains_vectorized_loop(body))
    latch->setMetadata(llvm::LLVMContext::MD_loop, shaped_loop_metadata());
  b_.SetInsertPoint(exit_bb);
}

llvm::MDNode* Emitter::shaped_loop_metadata() {
  // A loop around vector code Tessera shaped already (register tiles unrolled in loop IR, lanes
  // vectorized): LLVM's unroller and vectorisers stay off it even where a scalar loop elsewhere
  // in the module turns its loop passes on (compile.cc). Unrolled, a conv's 3-wide window loop
  // around a 28-accumulator tile let the scheduler hoist its broadcasts and spill.
  llvm::Metadata* no_vectorize[] = {
      llvm::MDString::get(ctx_, "llvm.loop.vectorize.enable"),
      llvm::ConstantAsMetadata::get(llvm::ConstantInt::getFalse(ctx_))};
  llvm::Metadata* no_interleave[] = {
      llvm::MDString::get(ctx_, "llvm.loop.interleave.count"),
      llvm::ConstantAsMetadata::get(llvm::ConstantInt::get(llvm::Type::getInt32Ty(ctx_), 1))};
  llvm::Metadata* ops[] = {
      nullptr, llvm::MDNode::get(ctx_, llvm::MDString::get(ctx_, "llvm.loop.unroll.disable")),
      llvm::MDNode::get(ctx_, no_vectorize), llvm::MDNode::get(ctx_, no_interleave)};
  // A loop ID is distinct and refers to itself.
  llvm::MDNode* id = llvm::MDNode::getDistinct(ctx_, ops);
  id->replaceOperandWith(0, id);
  return id;
}

void Emitter::emit_vectorized_for(const Stmt& s, llvm::Value* lo, int64_t lanes) {
  VecState vs;
  vs.var = s->var.get();
  vs.lanes = static_cast<int>(lanes);
  vs.lane0 = ir::var(s->var->name + ".lane0", s->var->lo, s->var->hi, s->var->dtype);
  vs.varying_vars.insert(vs.var);
  bool nonneg = known_nonneg(s->min);
  llvm::Type* it = lo->getType();
  std::vector<llvm::Constant*> steps;
  for (int64_t i = 0; i < lanes; ++i) steps.push_back(llvm::ConstantInt::get(it, i));
  vec_ = &vs;
  llvm::Value* lane_values =
      b_.CreateNSWAdd(splat(lo), llvm::ConstantVector::get(steps), s->var->name);
  {
    ScopedBinding bind_lanes(fn_, vs.var, {lane_values, true}, nonneg, false);
    ScopedBinding bind_lane0(fn_, vs.lane0.get(), {lo, false}, nonneg, false);
    emit_stmt(s->body);
  }
  vec_ = nullptr;
}

void Emitter::emit_parallel_call(const Stmt& s) {
  TESSERA_CHECK(s->callee >= 0 && s->callee < static_cast<int>(func_->outlined.size()))
      << "parallel call of a missing outlined body";
  TESSERA_CHECK(vec_ == nullptr) << "internal error: parallel call inside a vectorized loop";
  const loop::OutlinedBody& o = func_->outlined[s->callee];
  TESSERA_CHECK(ir::is_int(o.var->dtype))
      << "loop variable " << o.var->name << " must be an integer";
  llvm::Type* it = value_type(o.var->dtype);
  begin_root();
  llvm::Value* lo = b_.CreateSExtOrTrunc(emit_uniform(s->min), it);
  begin_root();
  llvm::Value* extent = b_.CreateSExtOrTrunc(emit_uniform(s->extent), it);
  const bool nonneg = known_nonneg(s->min);

  // The closure: the captures (outline_parallel_loops listed them), then the loop's min.
  std::vector<llvm::Type*> field_types;
  std::vector<llvm::Value*> field_values;
  for (const ir::Buffer& b : o.buffers) {
    llvm::Value* ptr = buffer_ptr(b);
    field_types.push_back(ptr->getType());
    field_values.push_back(ptr);
  }
  for (const ir::Var& v : o.vars) {
    auto found = fn_->vars.find(v.get());
    TESSERA_CHECK(found != fn_->vars.end())
        << "variable " << v->name << " captured by " << o.name << " is not bound";
    field_types.push_back(found->second.v->getType());
    field_values.push_back(found->second.v);
  }
  field_types.push_back(lo->getType());
  field_values.push_back(lo);

  std::string task_name = symbol_ + "_" + o.name;
  llvm::Type* i64 = b_.getInt64Ty();
  llvm::Type* i8p = b_.getInt8PtrTy();
  auto* closure_type = llvm::StructType::get(ctx_, field_types);

  // Caller: fill the closure (on this thread's stack) and hand the task to the pool.
  llvm::AllocaInst* closure = nullptr;
  {
    llvm::IRBuilder<> ab(fn_->alloca_block, fn_->alloca_block->begin());
    closure = ab.CreateAlloca(closure_type, nullptr, task_name + ".closure");
  }
  for (size_t i = 0; i < field_values.size(); ++i) {
    b_.CreateStore(field_values[i], b_.CreateStructGEP(closure_type, closure, i));
  }
  auto* task_type = llvm::FunctionType::get(b_.getVoidTy(), {i8p, i64, i64}, false);
  llvm::Function* task = new_function(task_name, task_type, /*external=*/false);
  llvm::FunctionCallee pfor = runtime_fn(
      "tessera_parallel_for",
      llvm::FunctionType::get(b_.getVoidTy(), {i64, task_type->getPointerTo(), i8p}, false));
  b_.CreateCall(pfor, {b_.CreateSExtOrTrunc(extent, i64), task, b_.CreateBitCast(closure, i8p)});

  // Task: unpack the closure, then run iterations [begin, end) of the loop. Buffer accesses keep
  // their alias scopes, so LLVM still knows the buffers do not overlap.
  llvm::IRBuilderBase::InsertPointGuard guard(b_);
  FnState st;
  st.fn = task;
  st.alloca_block = llvm::BasicBlock::Create(ctx_, "entry", task);
  b_.SetInsertPoint(st.alloca_block);
  llvm::Value* cl = b_.CreateBitCast(task->getArg(0), closure_type->getPointerTo());
  std::vector<llvm::Value*> fields;
  for (size_t i = 0; i < field_types.size(); ++i) {
    fields.push_back(b_.CreateLoad(field_types[i], b_.CreateStructGEP(closure_type, cl, i)));
  }
  size_t arg = 0;
  for (const ir::Buffer& b : o.buffers) st.bufs[b.get()] = fields[arg++];
  for (const ir::Var& v : o.vars) {
    st.vars[v.get()] = {fields[arg++], false};
    if (fn_->nonneg_vars.count(v.get())) st.nonneg_vars.insert(v.get());
    if (fn_->data_vars.count(v.get())) st.data_vars.insert(v.get());
  }
  llvm::Value* body_lo = fields[arg++];
  llvm::Value* begin = task->getArg(1);
  llvm::Value* end = task->getArg(2);
  FnState* outer = fn_;
  auto saved_cache = cache_;
  fn_ = &st;
  llvm::Value* chunk_lo = b_.CreateNSWAdd(body_lo, b_.CreateSExtOrTrunc(begin, it));
  llvm::Value* chunk_len = b_.CreateSExtOrTrunc(b_.CreateSub(end, begin), it);
  emit_serial_loop(o.var, nonneg, o.body, chunk_lo, chunk_len);
  b_.CreateRetVoid();
  fn_ = outer;
  cache_ = saved_cache;
}

void Emitter::emit_allocate(const Stmt& s) {
  const ir::Buffer& buf = s->buffer;
  TESSERA_CHECK(buf != nullptr) << "Allocate of a null buffer";
  TESSERA_CHECK(buf->scope != ir::MemScope::kShared)
      << "buffer " << buf->name
      << " has GPU shared scope, which the CPU code generator cannot allocate";
  llvm::Type* st = storage_type(buf->dtype);
  Expr size = ir::buffer_size(buf);
  auto old = fn_->bufs.find(buf.get());
  llvm::Value* shadowed = old == fn_->bufs.end() ? nullptr : old->second;
  bool wants_stack = buf->scope == ir::MemScope::kRegister || buf->scope == ir::MemScope::kStack;
  int64_t elem_bytes = static_cast<int64_t>(st->getPrimitiveSizeInBits() / 8);
  bool on_stack =
      wants_stack && size->is_const_int() && size->int_value <= kMaxStackBytes / elem_bytes;
  if (wants_stack && !on_stack) {
    notes_.push_back(std::string(ir::mem_scope_name(buf->scope)) + " buffer " + buf->name +
                     " allocated on the heap: " +
                     (size->is_const_int()
                          ? "larger than " + std::to_string(kMaxStackBytes) + " bytes"
                          : std::string("its size is not a constant")));
  }
  if (on_stack) {
    // In the entry block, so the slot is allocated once per call and SROA/mem2reg can promote
    // register tiles whose accesses all have constant offsets.
    uint64_t n = static_cast<uint64_t>(std::max<int64_t>(1, size->int_value));
    auto* array_type = llvm::ArrayType::get(st, n);
    llvm::AllocaInst* slot = nullptr;
    {
      llvm::IRBuilder<> ab(fn_->alloca_block, fn_->alloca_block->begin());
      slot = ab.CreateAlloca(array_type, nullptr, buf->name);
      slot->setAlignment(llvm::Align(64));
    }
    fn_->bufs[buf.get()] = b_.CreateConstInBoundsGEP2_64(array_type, slot, 0, 0);
    auto old_elems = fn_->stack_elems.find(buf.get());
    const int64_t shadowed_elems = old_elems == fn_->stack_elems.end() ? -1 : old_elems->second;
    fn_->stack_elems[buf.get()] = static_cast<int64_t>(n);
    emit_stmt(s->body);
    if (shadowed_elems >= 0) {
      fn_->stack_elems[buf.get()] = shadowed_elems;
    } else {
      fn_->stack_elems.erase(buf.get());
    }
  } else {
    // kHeap (or a stack/register buffer of symbolic size): 64-byte aligned heap memory for the
    // duration of the body.
    begin_root();
    llvm::Value* count = b_.CreateSExtOrTrunc(emit_uniform(size), b_.getInt64Ty());
    llvm::Value* bytes = b_.CreateMul(count, b_.getInt64(elem_bytes));
    llvm::FunctionCallee alloc = runtime_fn(
        "tessera_alloc", llvm::FunctionType::get(b_.getInt8PtrTy(), {b_.getInt64Ty()}, false));
    if (auto* fn = llvm::dyn_cast<llvm::Function>(alloc.getCallee())) {
      fn->addRetAttr(llvm::Attribute::NoAlias);
    }
    llvm::FunctionCallee release = runtime_fn(
        "tessera_free", llvm::FunctionType::get(b_.getVoidTy(), {b_.getInt8PtrTy()}, false));
    llvm::Value* raw = b_.CreateCall(alloc, {bytes}, buf->name + ".raw");
    fn_->bufs[buf.get()] = b_.CreateBitCast(raw, st->getPointerTo(), buf->name);
    emit_stmt(s->body);
    b_.CreateCall(release, {raw});
  }
  if (shadowed) {
    fn_->bufs[buf.get()] = shadowed;
  } else {
    fn_->bufs.erase(buf.get());
  }
}

}  // namespace tessera::codegen::detail
