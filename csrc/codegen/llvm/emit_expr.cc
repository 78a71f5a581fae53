// Expression emission: scalar code, or SIMD code for values that vary across the lanes of a
// vectorized loop (see VVal in emitter.h).
#include <llvm/ADT/APFloat.h>
#include <llvm/IR/Intrinsics.h>

#include "codegen/llvm/emitter.h"
#include "codegen/llvm/vector_math.h"
#include "ir/tensor.h"
#include "util/check.h"

namespace tessera::codegen::detail {

namespace {
constexpr int kVnSplat = 100002;  // value-numbering op code of splats (see Emitter::reuse)

// True if any node in `e` is a kLoad (each distinct node of the DAG visited once).
bool contains_load(const Expr& e, std::unordered_set<const ExprNode*>& seen) {
  if (!e.defined() || !seen.insert(e.get()).second) return false;
  if (e->kind == ExprKind::kLoad) return true;
  for (const Expr& o : e->operands) {
    if (contains_load(o, seen)) return true;
  }
  return false;
}
}  // namespace

void Emitter::begin_root() {
  cache_.clear();
  varying_memo_.clear();
  nonneg_memo_.clear();
  data_memo_.clear();
}

VVal Emitter::emit_root(const Expr& e) {
  begin_root();
  return emit(e);
}

llvm::Value* Emitter::reuse(int op, llvm::Value* a, llvm::Value* b,
                            const std::function<llvm::Value*()>& make) {
  VnKey key{op, a, b};
  for (auto it = fn_->vn_scopes.rbegin(); it != fn_->vn_scopes.rend(); ++it) {
    auto found = it->find(key);
    if (found != it->end()) return found->second;
  }
  llvm::Value* v = make();
  fn_->vn_scopes.back()[key] = v;
  return v;
}

VVal Emitter::emit(const Expr& e) {
  TESSERA_CHECK(e.defined()) << "undefined expression in loop IR";
  auto it = cache_.find(e.get());
  if (it != cache_.end()) return it->second;
  VVal r = emit_uncached(e);
  cache_[e.get()] = r;
  return r;
}

llvm::Value* Emitter::emit_uniform(const Expr& e) {
  VVal v = emit(e);
  TESSERA_CHECK(!v.varying) << "internal error: expression expected to be lane-invariant";
  return v.v;
}

llvm::Value* Emitter::splat(llvm::Value* v) {
  TESSERA_CHECK(vec_ != nullptr) << "internal error: splat outside a vectorized loop";
  // Keyed by the vector type too (a poison value of it stands for the type): one scalar is
  // splat at several widths in one function, by vectorized loops of different lane counts.
  const auto lanes = static_cast<unsigned>(vec_->lanes);
  llvm::Value* width = llvm::PoisonValue::get(llvm::FixedVectorType::get(v->getType(), lanes));
  return reuse(kVnSplat, v, width, [&] { return b_.CreateVectorSplat(lanes, v); });
}

llvm::Value* Emitter::widen(const VVal& x) { return x.varying ? x.v : splat(x.v); }

bool Emitter::is_varying(const Expr& e) {
  if (vec_ == nullptr) return false;
  auto it = varying_memo_.find(e.get());
  if (it != varying_memo_.end()) return it->second;
  bool r = false;
  if (e->kind == ExprKind::kVar) {
    r = vec_->varying_vars.count(e.get()) > 0;
  } else {
    for (const Expr& o : e->operands) {
      if (is_varying(o)) {
        r = true;
        break;
      }
    }
  }
  varying_memo_[e.get()] = r;
  return r;
}

bool Emitter::has_load(const Expr& e) {
  auto it = has_load_memo_.find(e.get());
  if (it != has_load_memo_.end()) return it->second;
  std::unordered_set<const ExprNode*> seen;
  bool r = contains_load(e, seen);
  has_load_memo_[e.get()] = r;
  return r;
}

bool Emitter::data_dependent(const Expr& e) {
  auto it = data_memo_.find(e.get());
  if (it != data_memo_.end()) return it->second;
  bool r = e->kind == ExprKind::kLoad ||
           (e->kind == ExprKind::kVar && fn_ != nullptr && fn_->data_vars.count(e.get()) > 0);
  for (size_t i = 0; !r && i < e->operands.size(); ++i) r = data_dependent(e->operands[i]);
  data_memo_[e.get()] = r;
  return r;
}

bool Emitter::known_nonneg(const Expr& e) {
  auto it = nonneg_memo_.find(e.get());
  if (it != nonneg_memo_.end()) return it->second;
  bool r = false;
  const auto& ops = e->operands;
  switch (e->kind) {
    case ExprKind::kIntImm:
      r = e->int_value >= 0;
      break;
    case ExprKind::kVar:
      r = e->lo >= 0 || (fn_ && fn_->nonneg_vars.count(e.get()) > 0);
      break;
    case ExprKind::kAdd:
    case ExprKind::kMul:
    case ExprKind::kFloorDiv:
    case ExprKind::kMin:
      r = known_nonneg(ops[0]) && known_nonneg(ops[1]);
      break;
    case ExprKind::kMax:
      r = known_nonneg(ops[0]) || known_nonneg(ops[1]);
      break;
    case ExprKind::kFloorMod:
      r = (ops[1]->kind == ExprKind::kIntImm && ops[1]->int_value > 0) ||
          (known_nonneg(ops[0]) && known_nonneg(ops[1]));
      break;
    case ExprKind::kSelect:
      r = known_nonneg(ops[1]) && known_nonneg(ops[2]);
      break;
    case ExprKind::kCast:
      r = ops[0]->dtype == DType::kBool ||
          (ir::is_int(e->dtype) && ir::is_int(ops[0]->dtype) && known_nonneg(ops[0]));
      break;
    default:
      r = false;
  }
  if (!ir::is_int(e->dtype)) r = false;
  nonneg_memo_[e.get()] = r;
  return r;
}

llvm::Value* Emitter::as_bool(llvm::Value* v, DType t) {
  if (t == DType::kBool) return v;
  if (ir::is_float(t)) return b_.CreateFCmpUNE(v, llvm::Constant::getNullValue(v->getType()));
  return b_.CreateICmpNE(v, llvm::Constant::getNullValue(v->getType()));
}

llvm::Value* Emitter::round_to_dtype(llvm::Value* v, DType t) {
  if (t == DType::kFloat16) {
    llvm::Value* h = b_.CreateFPTrunc(v, shaped_like(b_.getHalfTy(), v));
    return b_.CreateFPExt(h, v->getType());
  }
  if (t == DType::kBFloat16) {
    // Round to nearest even on the top 16 bits (NaN stays NaN: its payload is kept quiet).
    llvm::Type* it = shaped_like(b_.getInt32Ty(), v);
    llvm::Value* bits = b_.CreateBitCast(v, it);
    llvm::Value* lsb = b_.CreateAnd(b_.CreateLShr(bits, 16), 1);
    llvm::Value* rounded =
        b_.CreateAdd(b_.CreateAdd(bits, llvm::ConstantInt::get(it, 0x7fff)), lsb);
    rounded = b_.CreateAnd(rounded, llvm::ConstantInt::get(it, 0xffff0000u));
    llvm::Value* nan = b_.CreateOr(b_.CreateAnd(bits, llvm::ConstantInt::get(it, 0xffff0000u)),
                                   llvm::ConstantInt::get(it, 0x00400000));
    llvm::Value* r = b_.CreateSelect(b_.CreateFCmpUNO(v, v), nan, rounded);
    return b_.CreateBitCast(r, v->getType());
  }
  return v;
}

llvm::Value* Emitter::cast_value(llvm::Value* v, DType from, DType to) {
  if (from == to) return v;
  llvm::Type* dst = shaped_like(value_type(to), v);
  if (to == DType::kBool) return as_bool(v, from);
  if (from == DType::kBool) {
    return ir::is_float(to) ? b_.CreateUIToFP(v, dst) : b_.CreateZExt(v, dst);
  }
  if (ir::is_int(from) && ir::is_int(to)) return b_.CreateSExtOrTrunc(v, dst);
  if (ir::is_int(from) && ir::is_float(to)) return round_to_dtype(b_.CreateSIToFP(v, dst), to);
  if (ir::is_float(from) && ir::is_int(to)) {
    // fptosi of NaN/out-of-range values is poison in LLVM; freeze turns it into some fixed value
    // instead of letting poison spread into index arithmetic.
    return b_.CreateFreeze(b_.CreateFPToSI(v, dst));
  }
  // float -> float. f16/bf16 live in f32 registers.
  llvm::Value* r = v;
  if (v->getType() != dst) {
    r = dst->getScalarSizeInBits() > v->getType()->getScalarSizeInBits() ? b_.CreateFPExt(v, dst)
                                                                         : b_.CreateFPTrunc(v, dst);
  }
  bool narrower = (to == DType::kFloat16 || to == DType::kBFloat16) &&
                  !(from == DType::kFloat16 && to == DType::kFloat16);
  return narrower ? round_to_dtype(r, to) : r;
}

VVal Emitter::emit_uncached(const Expr& e) {
  switch (e->kind) {
    case ExprKind::kIntImm:
    case ExprKind::kFloatImm: {
      double fv = e->kind == ExprKind::kIntImm ? static_cast<double>(e->int_value) : e->float_value;
      if (e->dtype == DType::kBool) return {b_.getInt1(fv != 0.0), false};
      if (ir::is_float(e->dtype)) {
        llvm::APFloat ap(fv);
        bool lost = false;
        if (e->dtype == DType::kFloat16 || e->dtype == DType::kBFloat16) {
          ap.convert(
              e->dtype == DType::kFloat16 ? llvm::APFloat::IEEEhalf() : llvm::APFloat::BFloat(),
              llvm::APFloat::rmNearestTiesToEven, &lost);
        }
        if (e->dtype != DType::kFloat64) {
          ap.convert(llvm::APFloat::IEEEsingle(), llvm::APFloat::rmNearestTiesToEven, &lost);
        }
        return {llvm::ConstantFP::get(ctx_, ap), false};
      }
      int64_t iv = e->kind == ExprKind::kIntImm ? e->int_value : static_cast<int64_t>(fv);
      return {llvm::ConstantInt::get(value_type(e->dtype), iv, /*isSigned=*/true), false};
    }
    case ExprKind::kVar: {
      auto it = fn_->vars.find(e.get());
      TESSERA_CHECK(it != fn_->vars.end())
          << "variable " << e->name << " is used but not bound (not a loop variable, let "
          << "variable or size variable of the kernel)";
      return it->second;
    }
    case ExprKind::kNot: {
      VVal a = emit(e->operands[0]);
      return {b_.CreateNot(as_bool(a.v, e->operands[0]->dtype)), a.varying};
    }
    case ExprKind::kSelect:
      return emit_select(e);
    case ExprKind::kCast: {
      VVal a = emit(e->operands[0]);
      return {cast_value(a.v, e->operands[0]->dtype, e->dtype), a.varying};
    }
    case ExprKind::kCall:
      return emit_call(e);
    case ExprKind::kAccess:
      TESSERA_FAIL() << "tensor access " << (e->tensor ? e->tensor->name : std::string("?"))
                     << "[...] found in loop IR: lowering must turn accesses into buffer loads";
    case ExprKind::kLoad:
      return emit_load(e);
    default:
      return emit_binary(e);
  }
}

VVal Emitter::emit_binary(const Expr& e) {
  TESSERA_CHECK(e->operands.size() == 2) << ir::expr_kind_name(e->kind) << " needs two operands";
  const Expr& lhs = e->operands[0];
  const Expr& rhs = e->operands[1];
  bool logical = e->kind == ExprKind::kAnd || e->kind == ExprKind::kOr;
  TESSERA_CHECK(logical || lhs->dtype == rhs->dtype)
      << "operands of " << ir::expr_kind_name(e->kind) << " have different types ("
      << ir::dtype_name(lhs->dtype) << ", " << ir::dtype_name(rhs->dtype) << ")";
  VVal a = emit(lhs);
  VVal b = emit(rhs);
  bool varying = a.varying || b.varying;
  llvm::Value* av = varying ? widen(a) : a.v;
  llvm::Value* bv = varying ? widen(b) : b.v;
  if (logical) {
    av = as_bool(av, lhs->dtype);
    bv = as_bool(bv, rhs->dtype);
    llvm::Value* r = e->kind == ExprKind::kAnd ? b_.CreateAnd(av, bv) : b_.CreateOr(av, bv);
    return {r, varying};
  }
  bool nonneg = ir::is_int(lhs->dtype) && known_nonneg(lhs) && known_nonneg(rhs);
  bool index_math = !data_dependent(lhs) && !data_dependent(rhs);
  return {binop(e->kind, lhs->dtype, av, bv, rhs, nonneg, index_math), varying};
}

llvm::Value* Emitter::binop(ExprKind kind, DType t, llvm::Value* a, llvm::Value* b, const Expr& rhs,
                            bool both_nonneg, bool index_math) {
  // The operation's identity: kind, operand type (operands are already typed values) and
  // whether it may be marked nsw.
  int op = (static_cast<int>(kind) * 16 + static_cast<int>(t)) * 2 + (index_math ? 1 : 0);
  return reuse(op, a, b, [&] { return binop_raw(kind, t, a, b, rhs, both_nonneg, index_math); });
}

llvm::Value* Emitter::binop_raw(ExprKind kind, DType t, llvm::Value* a, llvm::Value* b,
                                const Expr& rhs, bool both_nonneg, bool index_math) {
  bool f = ir::is_float(t);
  // Index arithmetic (i64) never wraps in valid programs; nsw lets LLVM fold sign extensions
  // and reason about address recurrences. Data arithmetic (i32 and i64 values computed from
  // memory) wraps like PyTorch's: nsw there would let LLVM fold (a + b) > a into b > 0.
  bool nsw = t == DType::kInt64 && index_math;
  if (!f) {
    // Unrolled loops bind variables to constants, which leaves many x+0 and x*1 behind that
    // IRBuilder does not fold (it only folds constant operands on both sides).
    auto* cb = llvm::dyn_cast<llvm::ConstantInt>(b);
    auto* ca = llvm::dyn_cast<llvm::ConstantInt>(a);
    if ((kind == ExprKind::kAdd || kind == ExprKind::kSub) && cb && cb->isZero()) return a;
    if (kind == ExprKind::kAdd && ca && ca->isZero()) return b;
    if (kind == ExprKind::kMul && cb && cb->isOne()) return a;
    if (kind == ExprKind::kMul && ca && ca->isOne()) return b;
  }
  // Bool arithmetic saturates as in PyTorch: True + True is True (i1 addition would wrap to 0).
  if (t == DType::kBool && kind == ExprKind::kAdd) return b_.CreateOr(a, b);
  switch (kind) {
    case ExprKind::kAdd:
      return f ? b_.CreateFAdd(a, b) : b_.CreateAdd(a, b, "", false, nsw);
    case ExprKind::kSub:
      return f ? b_.CreateFSub(a, b) : b_.CreateSub(a, b, "", false, nsw);
    case ExprKind::kMul:
      return f ? b_.CreateFMul(a, b) : b_.CreateMul(a, b, "", false, nsw);
    case ExprKind::kDiv:
      TESSERA_CHECK(f) << "Div is float division; integer division must use FloorDiv";
      return b_.CreateFDiv(a, b);
    case ExprKind::kFloorDiv:
    case ExprKind::kFloorMod: {
      bool want_div = kind == ExprKind::kFloorDiv;
      if (f) {
        llvm::Value* q =
            b_.CreateIntrinsic(llvm::Intrinsic::floor, {a->getType()}, {b_.CreateFDiv(a, b)});
        return want_div ? q : b_.CreateFSub(a, b_.CreateFMul(q, b));
      }
      TESSERA_CHECK(ir::is_int(t)) << "FloorDiv/FloorMod need integer or float operands";
      return floor_divmod(want_div, a, b, rhs, both_nonneg);
    }
    case ExprKind::kMin:
    case ExprKind::kMax: {
      bool is_max = kind == ExprKind::kMax;
      if (f) return is_max ? emit_fmax_nan(b_, a, b) : emit_fmin_nan(b_, a, b);
      llvm::Intrinsic::ID id = t == DType::kBool
                                   ? (is_max ? llvm::Intrinsic::umax : llvm::Intrinsic::umin)
                                   : (is_max ? llvm::Intrinsic::smax : llvm::Intrinsic::smin);
      return b_.CreateIntrinsic(id, {a->getType()}, {a, b});
    }
    case ExprKind::kEQ:
      return f ? b_.CreateFCmpOEQ(a, b) : b_.CreateICmpEQ(a, b);
    case ExprKind::kNE:
      return f ? b_.CreateFCmpUNE(a, b) : b_.CreateICmpNE(a, b);
    case ExprKind::kLT:
      return f ? b_.CreateFCmpOLT(a, b)
               : (t == DType::kBool ? b_.CreateICmpULT(a, b) : b_.CreateICmpSLT(a, b));
    case ExprKind::kLE:
      return f ? b_.CreateFCmpOLE(a, b)
               : (t == DType::kBool ? b_.CreateICmpULE(a, b) : b_.CreateICmpSLE(a, b));
    case ExprKind::kGT:
      return f ? b_.CreateFCmpOGT(a, b)
               : (t == DType::kBool ? b_.CreateICmpUGT(a, b) : b_.CreateICmpSGT(a, b));
    case ExprKind::kGE:
      return f ? b_.CreateFCmpOGE(a, b)
               : (t == DType::kBool ? b_.CreateICmpUGE(a, b) : b_.CreateICmpSGE(a, b));
    default:
      break;
  }
  TESSERA_FAIL() << "unsupported binary expression " << ir::expr_kind_name(kind);
  return nullptr;  // not reached
}

llvm::Value* Emitter::floor_divmod(bool want_div, llvm::Value* a, llvm::Value* b, const Expr& rhs,
                                   bool both_nonneg) {
  llvm::Type* t = a->getType();
  llvm::Value* zero = llvm::Constant::getNullValue(t);
  llvm::Value* one = llvm::ConstantInt::get(t, 1);
  if (rhs->kind == ExprKind::kIntImm) {
    int64_t c = rhs->int_value;
    TESSERA_CHECK(c != 0) << "integer division by the constant 0";
    if (c > 0 && (c & (c - 1)) == 0) {
      // Arithmetic shift and mask are floor division/modulo by 2^k for negative values too.
      int k = 0;
      while ((int64_t{1} << k) != c) ++k;
      return want_div ? b_.CreateAShr(a, static_cast<uint64_t>(k))
                      : b_.CreateAnd(a, llvm::ConstantInt::get(t, c - 1));
    }
    if (c == -1) return want_div ? b_.CreateNeg(a) : zero;  // INT_MIN / -1 would trap
    return floor_divmod_nonzero(want_div, a, b, both_nonneg);
  }
  // x86 division traps (SIGFPE) on a zero divisor and on INT_MIN / -1. A zero divisor gives an
  // unspecified result here (guard_division.h reports it as an error); -1 becomes a wrapping
  // negation (quotient) and 0 (remainder). Non-negative operands cannot meet -1.
  llvm::Value* is_zero = b_.CreateICmpEQ(b, zero);
  if (both_nonneg) return floor_divmod_nonzero(want_div, a, b_.CreateSelect(is_zero, one, b), true);
  llvm::Value* is_minus_one = b_.CreateICmpEQ(b, llvm::ConstantInt::getSigned(t, -1));
  llvm::Value* safe = b_.CreateSelect(b_.CreateOr(is_zero, is_minus_one), one, b);
  llvm::Value* r = floor_divmod_nonzero(want_div, a, safe, false);
  return b_.CreateSelect(is_minus_one, want_div ? b_.CreateNeg(a) : zero, r);
}

llvm::Value* Emitter::floor_divmod_nonzero(bool want_div, llvm::Value* a, llvm::Value* b,
                                           bool both_nonneg) {
  if (both_nonneg) return want_div ? b_.CreateUDiv(a, b) : b_.CreateURem(a, b);
  // Truncating division, corrected by one when the remainder is non-zero and its sign differs
  // from the divisor's (that is when truncation rounded towards +inf).
  llvm::Type* t = a->getType();
  llvm::Value* q = b_.CreateSDiv(a, b);
  llvm::Value* r = b_.CreateSRem(a, b);
  llvm::Value* zero = llvm::Constant::getNullValue(t);
  llvm::Value* adjust =
      b_.CreateAnd(b_.CreateICmpNE(r, zero), b_.CreateICmpSLT(b_.CreateXor(r, b), zero));
  if (want_div) return b_.CreateSub(q, b_.CreateZExt(adjust, t));
  return b_.CreateAdd(r, b_.CreateSelect(adjust, b, zero));
}

VVal Emitter::emit_select(const Expr& e) {
  const Expr& ce = e->operands[0];
  const Expr& te = e->operands[1];
  const Expr& fe = e->operands[2];
  VVal c = emit(ce);
  llvm::Value* cv = as_bool(c.v, ce->dtype);
  auto coerce = [&](VVal v, const Expr& src) {
    if (src->dtype != e->dtype) v.v = cast_value(v.v, src->dtype, e->dtype);
    return v;
  };
  // A select guarding a load (padding, bounds checks) must not perform the load it guards: the
  // address may be out of bounds. Such selects are lazy: a branch for a uniform condition,
  // masked memory accesses for a varying one. Other selects evaluate both sides.
  bool lazy = has_load(te) || has_load(fe);
  if (!lazy) {
    VVal t = coerce(emit(te), te);
    VVal f = coerce(emit(fe), fe);
    bool varying = c.varying || t.varying || f.varying;
    if (!varying) return {b_.CreateSelect(cv, t.v, f.v), false};
    return {b_.CreateSelect(cv, widen(t), widen(f)), true};
  }
  if (!c.varying && vec_ != nullptr && (is_varying(te) || is_varying(fe))) {
    // Inside a vectorized body a uniform condition over varying arms becomes a splat lane
    // mask: masked loads are as cheap as a branch here and keep the body free of control flow.
    cv = splat(cv);
    c.varying = true;
  }
  if (!c.varying) {
    // A uniform condition over uniform arms (scalar code, or a lane-invariant value such as a
    // gathered row's index inside a vectorized body): branch and phi, and the value stays
    // uniform, as is_varying says it is.
    llvm::BasicBlock* then_bb = llvm::BasicBlock::Create(ctx_, "sel.then", fn_->fn);
    llvm::BasicBlock* else_bb = llvm::BasicBlock::Create(ctx_, "sel.else", fn_->fn);
    llvm::BasicBlock* merge_bb = llvm::BasicBlock::Create(ctx_, "sel.end", fn_->fn);
    b_.CreateCondBr(cv, then_bb, else_bb);
    auto saved = cache_;
    auto arm = [&](llvm::BasicBlock* bb, const Expr& x) {
      b_.SetInsertPoint(bb);
      push_region();
      VVal v = coerce(emit(x), x);
      pop_region();
      cache_ = saved;
      b_.CreateBr(merge_bb);
      return std::make_pair(v.v, b_.GetInsertBlock());
    };
    auto [tv, then_end] = arm(then_bb, te);
    auto [fv, else_end] = arm(else_bb, fe);
    b_.SetInsertPoint(merge_bb);
    llvm::PHINode* phi = b_.CreatePHI(tv->getType(), 2);
    phi->addIncoming(tv, then_end);
    phi->addIncoming(fv, else_end);
    return {phi, false};
  }
  llvm::Value* outer = vec_->mask;
  llvm::Value* not_c = b_.CreateNot(cv);
  auto saved = cache_;
  vec_->mask = outer ? b_.CreateAnd(outer, cv) : cv;
  VVal t = coerce(emit(te), te);
  cache_ = saved;
  vec_->mask = outer ? b_.CreateAnd(outer, not_c) : not_c;
  VVal f = coerce(emit(fe), fe);
  cache_ = saved;
  vec_->mask = outer;
  return {b_.CreateSelect(cv, widen(t), widen(f)), true};
}

llvm::Value* Emitter::libm_call(const std::string& name, const std::vector<llvm::Value*>& args) {
  llvm::Type* st = args[0]->getType()->getScalarType();
  std::vector<llvm::Type*> params(args.size(), st);
  llvm::FunctionCallee callee = runtime_fn(name, llvm::FunctionType::get(st, params, false));
  if (auto* fn = llvm::dyn_cast<llvm::Function>(callee.getCallee())) {
    // errno is never read by kernels, so the calls can be treated as pure.
    fn->setDoesNotAccessMemory();
  }
  auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(args[0]->getType());
  if (vt == nullptr) return b_.CreateCall(callee, args);
  // No vector libm: one call per lane.
  llvm::Value* out = llvm::UndefValue::get(vt);
  for (unsigned i = 0; i < vt->getNumElements(); ++i) {
    std::vector<llvm::Value*> lane_args;
    for (llvm::Value* a : args) lane_args.push_back(b_.CreateExtractElement(a, i));
    out = b_.CreateInsertElement(out, b_.CreateCall(callee, lane_args), i);
  }
  return out;
}

VVal Emitter::emit_call(const Expr& e) {
  ir::CallOp op = e->call_op;
  TESSERA_CHECK(static_cast<int>(e->operands.size()) == ir::call_op_arity(op))
      << ir::call_op_name(op) << " called with " << e->operands.size() << " operand(s)";
  TESSERA_CHECK(ir::is_float(e->dtype)) << ir::call_op_name(op) << " needs a float type";
  std::vector<VVal> args;
  bool varying = false;
  for (const Expr& o : e->operands) {
    VVal v = emit(o);
    if (o->dtype != e->dtype) v.v = cast_value(v.v, o->dtype, e->dtype);
    varying |= v.varying;
    args.push_back(v);
  }
  std::vector<llvm::Value*> av;
  for (const VVal& a : args) av.push_back(varying ? widen(a) : a.v);
  llvm::Value* x = av[0];
  llvm::Type* ty = x->getType();
  bool f64 = e->dtype == DType::kFloat64;
  auto intrinsic = [&](llvm::Intrinsic::ID id) { return b_.CreateIntrinsic(id, {ty}, {x}); };
  auto one = [&] { return llvm::ConstantFP::get(ty, 1.0); };
  llvm::Value* r = nullptr;
  switch (op) {
    case ir::CallOp::kExp:
      r = f64 ? libm_call("exp", {x}) : emit_exp_f32(b_, x);
      break;
    case ir::CallOp::kLog:
      r = f64 ? libm_call("log", {x}) : emit_log_f32(b_, x);
      break;
    case ir::CallOp::kTanh:
      r = f64 ? libm_call("tanh", {x}) : emit_tanh_f32(b_, x);
      break;
    case ir::CallOp::kErf:
      r = f64 ? libm_call("erf", {x}) : emit_erf_f32(b_, x);
      break;
    case ir::CallOp::kSigmoid:
      r = f64 ? b_.CreateFDiv(one(), b_.CreateFAdd(one(), libm_call("exp", {b_.CreateFNeg(x)})))
              : emit_sigmoid_f32(b_, x);
      break;
    case ir::CallOp::kSqrt:
      r = intrinsic(llvm::Intrinsic::sqrt);
      break;
    case ir::CallOp::kRsqrt:
      r = b_.CreateFDiv(one(), intrinsic(llvm::Intrinsic::sqrt));
      break;
    case ir::CallOp::kAbs:
      r = intrinsic(llvm::Intrinsic::fabs);
      break;
    case ir::CallOp::kFloor:
      r = intrinsic(llvm::Intrinsic::floor);
      break;
    case ir::CallOp::kCeil:
      r = intrinsic(llvm::Intrinsic::ceil);
      break;
    case ir::CallOp::kPow: {
      // Small integral constant exponents are exact (or within an ulp) as multiplications and
      // avoid a libm call per lane.
      const Expr& y = e->operands[1];
      if (y->is_const()) {
        double c =
            y->kind == ExprKind::kIntImm ? static_cast<double>(y->int_value) : y->float_value;
        if (c == 0.0) r = one();
        if (c == 1.0) r = x;
        if (c == 2.0) r = b_.CreateFMul(x, x);
        if (c == 3.0) r = b_.CreateFMul(b_.CreateFMul(x, x), x);
        if (c == -1.0) r = b_.CreateFDiv(one(), x);
      }
      if (r == nullptr) r = libm_call(f64 ? "pow" : "powf", {x, av[1]});
      break;
    }
  }
  TESSERA_CHECK(r != nullptr) << "unsupported call " << ir::call_op_name(op);
  return {r, varying};
}

}  // namespace tessera::codegen::detail
