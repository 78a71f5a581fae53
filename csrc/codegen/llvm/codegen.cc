#include "codegen/llvm/codegen.h"

#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>

#include <unordered_set>

#include "codegen/llvm/emitter.h"
#include "loop/stmt_functor.h"
#include "util/check.h"

namespace tessera::codegen {

namespace detail {

namespace {

// Buffers a kernel touches (stores, loads, prefetches, allocations), each once in first-use
// order, outlined bodies included where they are called.
class BufferLister : public loop::StmtVisitor {
 public:
  explicit BufferLister(const loop::LoweredFunc& f) : f_(f) {}
  std::vector<const ir::BufferNode*> buffers;

  void add(const ir::BufferNode* b) {
    if (seen_.insert(b).second) buffers.push_back(b);
  }

 protected:
  void visit_expr(const Expr& e) override {
    if (!e.defined() || !seen_nodes_.insert(e.get()).second) return;
    if (e->kind == ExprKind::kLoad) add(e->buffer.get());
    for (const Expr& o : e->operands) visit_expr(o);
  }
  void visit_store(const Stmt& s) override {
    add(s->buffer.get());
    StmtVisitor::visit_store(s);
  }
  void visit_prefetch(const Stmt& s) override {
    add(s->buffer.get());
    StmtVisitor::visit_prefetch(s);
  }
  void visit_allocate(const Stmt& s) override {
    add(s->buffer.get());
    StmtVisitor::visit_allocate(s);
  }
  void visit_parallel_call(const Stmt& s) override {
    StmtVisitor::visit_parallel_call(s);
    if (s->callee >= 0 && s->callee < static_cast<int>(f_.outlined.size())) {
      visit(f_.outlined[s->callee].body);
    }
  }

 private:
  const loop::LoweredFunc& f_;
  std::unordered_set<const ir::BufferNode*> seen_;
  std::unordered_set<const ExprNode*> seen_nodes_;
};

}  // namespace

Emitter::Emitter(llvm::Module& module, std::string symbol, const HostCpu& cpu)
    : module_(module), ctx_(module.getContext()), b_(ctx_), symbol_(std::move(symbol)), cpu_(cpu) {
  // Contraction (a*b+c -> fma) only; every other fast-math relaxation stays off so that NaN/inf
  // and signed zeros behave as in eager PyTorch.
  llvm::FastMathFlags fmf;
  fmf.setAllowContract(true);
  b_.setFastMathFlags(fmf);
}

llvm::Type* Emitter::value_type(DType t) {
  switch (t) {
    case DType::kBool:
      return b_.getInt1Ty();
    case DType::kInt32:
      return b_.getInt32Ty();
    case DType::kInt64:
      return b_.getInt64Ty();
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kFloat32:
      return b_.getFloatTy();
    case DType::kFloat64:
      return b_.getDoubleTy();
  }
  TESSERA_FAIL() << "unknown dtype";
  return nullptr;  // not reached
}

llvm::Type* Emitter::storage_type(DType t) {
  switch (t) {
    case DType::kBool:
      return b_.getInt8Ty();
    case DType::kFloat16:
    case DType::kBFloat16:
      return b_.getInt16Ty();
    default:
      return value_type(t);
  }
}

llvm::Type* Emitter::shaped_like(llvm::Type* elem, llvm::Value* like) {
  if (auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(like->getType())) {
    return llvm::FixedVectorType::get(elem, vt->getNumElements());
  }
  return elem;
}

llvm::Function* Emitter::new_function(const std::string& name, llvm::FunctionType* type,
                                      bool external) {
  auto* fn = llvm::Function::Create(
      type, external ? llvm::Function::ExternalLinkage : llvm::Function::InternalLinkage, name,
      module_);
  fn->addFnAttr("target-cpu", cpu_.name);
  fn->addFnAttr("target-features", cpu_.features);
  if (cpu_.vector_bits >= 256) {
    // Without these LLVM splits 512-bit vectors into 256-bit halves on CPUs whose tuning prefers
    // narrow vectors (most AVX-512 parts, for frequency reasons); our explicit <16 x float>
    // code is written for full-width registers.
    std::string bits = std::to_string(cpu_.vector_bits);
    fn->addFnAttr("prefer-vector-width", bits);
    fn->addFnAttr("min-legal-vector-width", bits);
  }
  fn->addFnAttr(llvm::Attribute::NoUnwind);
  fn->addFnAttr("no-trapping-math", "true");
  return fn;
}

llvm::FunctionCallee Emitter::runtime_fn(const std::string& name, llvm::FunctionType* type) {
  llvm::FunctionCallee callee = module_.getOrInsertFunction(name, type);
  if (auto* fn = llvm::dyn_cast<llvm::Function>(callee.getCallee())) {
    fn->addFnAttr(llvm::Attribute::NoUnwind);
  }
  return callee;
}

void Emitter::setup_alias_scopes(const loop::LoweredFunc& f) {
  BufferLister lister(f);
  for (const ir::Buffer& b : f.args) lister.add(b.get());
  lister.visit(f.body);
  const std::vector<const ir::BufferNode*>& buffers = lister.buffers;
  if (buffers.size() < 2) return;
  llvm::MDBuilder mdb(ctx_);
  llvm::MDNode* domain = mdb.createAnonymousAliasScopeDomain(symbol_);
  std::vector<llvm::Metadata*> scopes;
  for (const ir::BufferNode* b : buffers) {
    scopes.push_back(mdb.createAnonymousAliasScope(domain, b->name));
  }
  for (size_t i = 0; i < buffers.size(); ++i) {
    std::vector<llvm::Metadata*> others;
    for (size_t j = 0; j < buffers.size(); ++j) {
      if (j != i) others.push_back(scopes[j]);
    }
    alias_md_[buffers[i]] = {llvm::MDNode::get(ctx_, {scopes[i]}), llvm::MDNode::get(ctx_, others)};
  }
}

void Emitter::tag_access(llvm::Value* access, const ir::Buffer& b) {
  auto it = alias_md_.find(b.get());
  auto* inst = llvm::dyn_cast<llvm::Instruction>(access);
  if (it == alias_md_.end() || inst == nullptr) return;
  inst->setMetadata(llvm::LLVMContext::MD_alias_scope, it->second.first);
  inst->setMetadata(llvm::LLVMContext::MD_noalias, it->second.second);
}

void Emitter::emit_kernel(const loop::LoweredFunc& f) {
  TESSERA_CHECK(f.body != nullptr) << "kernel " << f.name << " has no body";
  std::unordered_set<const ir::BufferNode*> seen;
  for (const ir::Buffer& buf : f.args) {
    TESSERA_CHECK(buf != nullptr) << "kernel " << f.name << " has a null buffer argument";
    TESSERA_CHECK(seen.insert(buf.get()).second)
        << "buffer " << buf->name << " appears twice in the arguments of " << f.name;
  }
  for (const ir::Var& v : f.size_vars) {
    TESSERA_CHECK(v.defined() && v->is_var()) << "size_vars of " << f.name << " must be vars";
    TESSERA_CHECK(ir::is_int(v->dtype)) << "size variable " << v->name << " must be an integer";
  }
  // Kernel buffers never overlap, and neither do the temporaries the kernel allocates. Every
  // memory access carries alias-scope metadata saying so (what inlining a function with noalias
  // pointer parameters would produce), and the body is emitted straight into the ABI entry:
  // a separate body function would be optimised twice, before and after inlining.
  func_ = &f;
  setup_alias_scopes(f);

  llvm::Type* i8pp = b_.getInt8PtrTy()->getPointerTo();
  llvm::Type* i64p = b_.getInt64Ty()->getPointerTo();
  llvm::Function* entry = new_function(
      symbol_, llvm::FunctionType::get(b_.getVoidTy(), {i8pp, i64p}, false), /*external=*/true);
  entry->addParamAttr(0, llvm::Attribute::NoCapture);
  entry->addParamAttr(1, llvm::Attribute::NoCapture);
  FnState st;
  st.fn = entry;
  st.alloca_block = llvm::BasicBlock::Create(ctx_, "entry", entry);
  fn_ = &st;
  b_.SetInsertPoint(st.alloca_block);
  for (size_t i = 0; i < f.args.size(); ++i) {
    llvm::Value* slot = b_.CreateConstGEP1_64(b_.getInt8PtrTy(), entry->getArg(0), i);
    llvm::Value* raw = b_.CreateAlignedLoad(b_.getInt8PtrTy(), slot, llvm::Align(8));
    st.bufs[f.args[i].get()] =
        b_.CreateBitCast(raw, storage_type(f.args[i]->dtype)->getPointerTo(), f.args[i]->name);
  }
  for (size_t j = 0; j < f.size_vars.size(); ++j) {
    const ir::Var& v = f.size_vars[j];
    llvm::Value* slot = b_.CreateConstGEP1_64(b_.getInt64Ty(), entry->getArg(1), j);
    llvm::Value* raw = b_.CreateAlignedLoad(b_.getInt64Ty(), slot, llvm::Align(8), v->name);
    st.vars[v.get()] = {b_.CreateSExtOrTrunc(raw, value_type(v->dtype)), false};
    if (v->lo >= 0) st.nonneg_vars.insert(v.get());
  }
  emit_stmt(f.body);
  b_.CreateRetVoid();
  fn_ = nullptr;
  func_ = nullptr;
}

}  // namespace detail

std::vector<std::string> build_llvm_module(const loop::LoweredFunc& f, const std::string& symbol,
                                           llvm::Module& module) {
  detail::Emitter emitter(module, symbol, host_cpu());
  emitter.emit_kernel(f);
  std::string err;
  llvm::raw_string_ostream os(err);
  if (llvm::verifyModule(module, &os)) {
    os.flush();
    std::string ir;
    llvm::raw_string_ostream irs(ir);
    module.print(irs, nullptr);
    irs.flush();
    TESSERA_FAIL() << "internal error: invalid LLVM IR generated for kernel " << f.name << ": "
                   << err << "\n"
                   << ir;
  }
  return emitter.notes();
}

}  // namespace tessera::codegen
