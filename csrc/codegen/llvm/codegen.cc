#include "codegen/llvm/codegen.h"

#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>

#include <unordered_set>

#include "codegen/llvm/emitter.h"
#include "util/check.h"

namespace tessera::codegen {

namespace detail {

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

llvm::Type* Emitter::shaped(llvm::Type* elem, int lanes) {
  return lanes > 0 ? llvm::FixedVectorType::get(elem, lanes) : elem;
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

void Emitter::emit_kernel(const loop::LoweredFunc& f) {
  TESSERA_CHECK(f.body != nullptr) << "kernel " << f.name << " has no body";
  std::unordered_set<const ir::BufferNode*> seen;
  std::vector<llvm::Type*> params;
  for (const ir::Buffer& buf : f.args) {
    TESSERA_CHECK(buf != nullptr) << "kernel " << f.name << " has a null buffer argument";
    TESSERA_CHECK(seen.insert(buf.get()).second)
        << "buffer " << buf->name << " appears twice in the arguments of " << f.name;
    params.push_back(storage_type(buf->dtype)->getPointerTo());
  }
  for (const ir::Var& v : f.size_vars) {
    TESSERA_CHECK(v.defined() && v->is_var()) << "size_vars of " << f.name << " must be vars";
    TESSERA_CHECK(ir::is_int(v->dtype)) << "size variable " << v->name << " must be an integer";
    params.push_back(value_type(v->dtype));
  }
  llvm::Function* body =
      new_function(symbol_ + "_body", llvm::FunctionType::get(b_.getVoidTy(), params, false),
                   /*external=*/false);
  for (size_t i = 0; i < f.args.size(); ++i) {
    body->addParamAttr(static_cast<unsigned>(i), llvm::Attribute::NoAlias);
    body->getArg(static_cast<unsigned>(i))->setName(f.args[i]->name);
  }

  // The C ABI entry: unpack buffers[] and sizes[] and call the body.
  llvm::Type* i8pp = b_.getInt8PtrTy()->getPointerTo();
  llvm::Type* i64p = b_.getInt64Ty()->getPointerTo();
  llvm::Function* entry = new_function(
      symbol_, llvm::FunctionType::get(b_.getVoidTy(), {i8pp, i64p}, false), /*external=*/true);
  b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", entry));
  std::vector<llvm::Value*> call_args;
  for (size_t i = 0; i < f.args.size(); ++i) {
    llvm::Value* slot = b_.CreateConstGEP1_64(b_.getInt8PtrTy(), entry->getArg(0), i);
    llvm::Value* raw = b_.CreateAlignedLoad(b_.getInt8PtrTy(), slot, llvm::Align(8));
    call_args.push_back(b_.CreateBitCast(raw, params[i]));
  }
  for (size_t j = 0; j < f.size_vars.size(); ++j) {
    llvm::Value* slot = b_.CreateConstGEP1_64(b_.getInt64Ty(), entry->getArg(1), j);
    llvm::Value* v = b_.CreateAlignedLoad(b_.getInt64Ty(), slot, llvm::Align(8));
    call_args.push_back(b_.CreateSExtOrTrunc(v, params[f.args.size() + j]));
  }
  b_.CreateCall(body, call_args);
  b_.CreateRetVoid();

  // The body.
  FnState st;
  st.fn = body;
  st.alloca_block = llvm::BasicBlock::Create(ctx_, "entry", body);
  for (size_t i = 0; i < f.args.size(); ++i) st.bufs[f.args[i].get()] = body->getArg(i);
  for (size_t j = 0; j < f.size_vars.size(); ++j) {
    const ir::Var& v = f.size_vars[j];
    llvm::Argument* arg = body->getArg(static_cast<unsigned>(f.args.size() + j));
    arg->setName(v->name);
    st.vars[v.get()] = {arg, false};
    if (v->lo >= 0) st.nonneg_vars.insert(v.get());
  }
  fn_ = &st;
  b_.SetInsertPoint(st.alloca_block);
  emit_stmt(f.body);
  b_.CreateRetVoid();
  fn_ = nullptr;
}

}  // namespace detail

void build_llvm_module(const loop::LoweredFunc& f, const std::string& symbol,
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
}

}  // namespace tessera::codegen
