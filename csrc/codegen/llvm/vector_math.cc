#include "codegen/llvm/vector_math.h"

#include <llvm/IR/Intrinsics.h>

#include <initializer_list>
#include <limits>

namespace tessera::codegen {

// Polynomial coefficients below were fitted for this file in double precision (weighted least
// squares on Chebyshev nodes, iterated towards minimax relative error with Lawson's algorithm);
// the comment at each set states the fitted function, interval and its max relative error.

namespace {

using llvm::Value;

llvm::Constant* fconst(Value* like, double v) { return llvm::ConstantFP::get(like->getType(), v); }

// i32 scalar or vector matching a float scalar or vector.
llvm::Type* int32_like(Value* x) {
  llvm::Type* i32 = llvm::Type::getInt32Ty(x->getContext());
  if (auto* vt = llvm::dyn_cast<llvm::VectorType>(x->getType())) {
    return llvm::VectorType::get(i32, vt->getElementCount());
  }
  return i32;
}

llvm::Constant* iconst(llvm::Type* t, int64_t v) { return llvm::ConstantInt::get(t, v, true); }

Value* fmuladd(llvm::IRBuilder<>& b, Value* a, Value* x, Value* c) {
  return b.CreateIntrinsic(llvm::Intrinsic::fmuladd, {a->getType()}, {a, x, c});
}

Value* unary(llvm::IRBuilder<>& b, llvm::Intrinsic::ID id, Value* x) {
  return b.CreateIntrinsic(id, {x->getType()}, {x});
}

// c[0] + x*(c[1] + x*(c[2] + ...)).
Value* horner(llvm::IRBuilder<>& b, Value* x, std::initializer_list<double> coeffs) {
  const double* c = coeffs.begin();
  int n = static_cast<int>(coeffs.size());
  Value* acc = fconst(x, c[n - 1]);
  for (int i = n - 2; i >= 0; --i) acc = fmuladd(b, acc, x, fconst(x, c[i]));
  return acc;
}

// select(isnan(x), x, r): the NaN input itself comes out, as libm does.
Value* keep_nan(llvm::IRBuilder<>& b, Value* x, Value* r) {
  return b.CreateSelect(b.CreateFCmpUNO(x, x), x, r);
}

// Clamps to [lo, hi]; NaN becomes lo (callers restore NaN at the end with keep_nan).
Value* clamp_no_nan(llvm::IRBuilder<>& b, Value* x, double lo, double hi) {
  Value* l = fconst(x, lo);
  Value* h = fconst(x, hi);
  Value* y = b.CreateSelect(b.CreateFCmpOGT(x, l), x, l);
  return b.CreateSelect(b.CreateFCmpOLT(y, h), y, h);
}

// 2^n for integer n in [-126, 127] (a float scalar/vector of the type of `like`).
Value* pow2i(llvm::IRBuilder<>& b, Value* n, Value* like) {
  llvm::Type* it = n->getType();
  Value* bits = b.CreateShl(b.CreateAdd(n, iconst(it, 127)), iconst(it, 23));
  return b.CreateBitCast(bits, like->getType());
}

// exp(x) without the NaN fix-up (callers that know x is not NaN skip it).
Value* exp_core(llvm::IRBuilder<>& b, Value* x) {
  // Beyond these bounds the result is +inf / +0 in fp32; clamping keeps the integer exponent
  // small while still overflowing/underflowing naturally in the final scaling.
  Value* xc = clamp_no_nan(b, x, -104.0, 89.0);
  // x = n*ln2 + r, |r| <= ln2/2; ln2 is split in two so that n*ln2_hi is exact.
  const double kLog2e = 1.4426950408889634;
  const double kLn2Hi = 0.693145751953125;       // 0x3f317200: 16 significant bits
  const double kLn2Lo = 1.4286068202862268e-06;  // ln2 - kLn2Hi
  Value* n = unary(b, llvm::Intrinsic::rint, b.CreateFMul(xc, fconst(x, kLog2e)));
  Value* r = fmuladd(b, n, fconst(x, -kLn2Hi), xc);
  r = fmuladd(b, n, fconst(x, -kLn2Lo), r);
  // exp(r) = 1 + r + r^2 * P(r); P fits (exp(r)-1-r)/r^2 on [-0.35, 0.35], rel. err 5.0e-9.
  Value* q = horner(b, r,
                    {0.49999999803707834, 0.16666666528663993, 0.041666585740260546,
                     0.00833337875832667, 0.0013925601342556324, 0.0001984177983658878});
  Value* p = b.CreateFAdd(fmuladd(b, b.CreateFMul(r, r), q, r), fconst(x, 1.0));
  // Scale by 2^n in two steps, 2^(n/2) * 2^(n - n/2): n spans [-150, 129], beyond the normal
  // exponent range at both ends, but each half stays representable. The last multiply rounds
  // once, also into the denormal range.
  Value* ni = b.CreateFPToSI(n, int32_like(x));
  Value* n1 = b.CreateAShr(ni, iconst(ni->getType(), 1));
  Value* n2 = b.CreateSub(ni, n1);
  return b.CreateFMul(b.CreateFMul(p, pow2i(b, n1, x)), pow2i(b, n2, x));
}

}  // namespace

Value* emit_exp_f32(llvm::IRBuilder<>& b, Value* x) { return keep_nan(b, x, exp_core(b, x)); }

Value* emit_log_f32(llvm::IRBuilder<>& b, Value* x) {
  llvm::Type* it = int32_like(x);
  // Denormals: scale into the normal range first and compensate in the exponent.
  Value* den = b.CreateFCmpOLT(x, fconst(x, 1.1754943508222875e-38));
  Value* xs = b.CreateSelect(den, b.CreateFMul(x, fconst(x, 8388608.0)), x);
  Value* bits = b.CreateBitCast(xs, it);
  Value* e = b.CreateSub(b.CreateLShr(bits, iconst(it, 23)), iconst(it, 127));
  e = b.CreateSub(e, b.CreateSelect(den, iconst(it, 23), iconst(it, 0)));
  // Mantissa m in [1, 2), then moved to [sqrt(1/2), sqrt(2)) so that log(m) is centred on 0.
  Value* mbits = b.CreateOr(b.CreateAnd(bits, iconst(it, 0x007fffff)), iconst(it, 0x3f800000));
  Value* m = b.CreateBitCast(mbits, x->getType());
  Value* big = b.CreateFCmpOGT(m, fconst(x, 1.4142135623730951));
  m = b.CreateSelect(big, b.CreateFMul(m, fconst(x, 0.5)), m);
  e = b.CreateAdd(e, b.CreateZExt(big, it));
  // log(m) = 2 atanh(s) with s = (m-1)/(m+1) = f/(2+f): |s| <= 0.172, so the odd series
  // 2s + s*z*(2/3 + 2z/5 + 2z^2/7 + ...) with z = s^2 converges fast (truncation < 1e-9).
  Value* f = b.CreateFSub(m, fconst(x, 1.0));  // exact (Sterbenz)
  Value* s = b.CreateFDiv(f, b.CreateFAdd(f, fconst(x, 2.0)));
  Value* z = b.CreateFMul(s, s);
  Value* poly = horner(b, z, {2.0 / 3, 2.0 / 5, 2.0 / 7, 2.0 / 9, 2.0 / 11});
  Value* ef = b.CreateSIToFP(e, x->getType());
  const double kLn2Hi = 0.693145751953125;
  const double kLn2Lo = 1.4286068202862268e-06;
  // Small terms first: e*ln2_lo + s*z*P, then 2s, then e*ln2_hi (exact product).
  Value* small = fmuladd(b, b.CreateFMul(s, z), poly, b.CreateFMul(ef, fconst(x, kLn2Lo)));
  Value* logm = b.CreateFAdd(b.CreateFAdd(s, s), small);
  Value* r = fmuladd(b, ef, fconst(x, kLn2Hi), logm);
  // Special values: log(+inf) = +inf, log(+-0) = -inf, log(x < 0) = NaN, NaN stays NaN.
  const double inf = std::numeric_limits<double>::infinity();
  r = b.CreateSelect(b.CreateFCmpOEQ(x, fconst(x, inf)), fconst(x, inf), r);
  r = b.CreateSelect(b.CreateFCmpOEQ(x, fconst(x, 0.0)), fconst(x, -inf), r);
  r = b.CreateSelect(b.CreateFCmpOLT(x, fconst(x, 0.0)),
                     fconst(x, std::numeric_limits<double>::quiet_NaN()), r);
  return keep_nan(b, x, r);
}

Value* emit_tanh_f32(llvm::IRBuilder<>& b, Value* x) {
  Value* a = unary(b, llvm::Intrinsic::fabs, x);
  // |x| < 0.625: tanh(x) = x + x*z*P(z), z = x^2; P fits (tanh(x)/x - 1)/z, rel. err 6.9e-9.
  Value* z = b.CreateFMul(x, x);
  Value* p = horner(b, z,
                    {-0.3333333312245624, 0.13333296502954914, -0.053957635212660546,
                     0.02175598667758265, -0.008302434931803425, 0.0022466022441623218});
  Value* small = fmuladd(b, b.CreateFMul(x, z), p, x);
  // Otherwise tanh(|x|) = 1 - 2/(exp(2|x|) + 1): no cancellation for |x| >= 0.625, and it
  // saturates to exactly 1 once exp overflows. The sign is copied back.
  Value* e = exp_core(b, b.CreateFAdd(a, a));
  Value* large =
      b.CreateFSub(fconst(x, 1.0), b.CreateFDiv(fconst(x, 2.0), b.CreateFAdd(e, fconst(x, 1.0))));
  large = b.CreateIntrinsic(llvm::Intrinsic::copysign, {x->getType()}, {large, x});
  Value* r = b.CreateSelect(b.CreateFCmpOLT(a, fconst(x, 0.625)), small, large);
  // tanh is odd: the sign is x's, also for -0.0 (where the polynomial gives +0.0).
  r = b.CreateIntrinsic(llvm::Intrinsic::copysign, {x->getType()}, {r, x});
  return keep_nan(b, x, r);
}

Value* emit_sigmoid_f32(llvm::IRBuilder<>& b, Value* x) {
  // With e = exp(-|x|) <= 1: sigmoid(x) = 1/(1+e) for x >= 0 and e/(1+e) for x < 0. Never
  // overflows, and tiny results for very negative x come out as denormals, not 0.
  Value* a = unary(b, llvm::Intrinsic::fabs, x);
  Value* e = exp_core(b, b.CreateFNeg(a));
  Value* s = b.CreateFDiv(fconst(x, 1.0), b.CreateFAdd(e, fconst(x, 1.0)));
  Value* r = b.CreateSelect(b.CreateFCmpOGE(x, fconst(x, 0.0)), s, b.CreateFMul(e, s));
  return keep_nan(b, x, r);
}

Value* emit_erf_f32(llvm::IRBuilder<>& b, Value* x) {
  Value* a = unary(b, llvm::Intrinsic::fabs, x);
  // |x| < 1: erf(x) = x * P(z), z = x^2; P fits erf(x)/x on z in [0, 1], rel. err 1.2e-9.
  // The leading coefficient 2/sqrt(pi) is applied in two parts (hi + lo) so that the dominant
  // term x * 2/sqrt(pi) is rounded only once.
  Value* z = b.CreateFMul(a, a);
  const double kC0 = 1.128379165726852;
  const double kC0Hi = static_cast<double>(static_cast<float>(kC0));
  Value* tail = horner(b, z,
                       {-0.37612625824463675, 0.11283585149384093, -0.02685381193016922,
                        0.0051883276305088955, -0.0008010192842636136, 7.853857969731882e-05});
  Value* small =
      fmuladd(b, a, fconst(x, kC0Hi),
              fmuladd(b, a, fconst(x, kC0 - kC0Hi), b.CreateFMul(b.CreateFMul(a, z), tail)));
  // |x| >= 1: erf = 1 - exp(-x^2) * Q(x), Q fits the scaled erfc exp(x^2)*erfc(x) on [1, 4] in
  // u = x - 2.5 (rel. err 5.1e-9). Beyond 4 the result rounds to 1, so |x| is clamped there.
  Value* ac = b.CreateSelect(b.CreateFCmpOLT(a, fconst(x, 4.0)), a, fconst(x, 4.0));
  Value* u = b.CreateFSub(ac, fconst(x, 2.5));
  Value* q = horner(
      b, u,
      {0.21080636385450952, -0.07434733750986133, 0.024938001694103915, -0.008001686872586056,
       0.0024670284687700237, -0.0007331707750089368, 0.00021099058606298589,
       -5.950478895900952e-05, 1.605055586697255e-05, -3.755534079697251e-06, 1.001916408209147e-06,
       -4.2512575848695433e-07, 9.918179238346617e-08});
  Value* erfc = b.CreateFMul(exp_core(b, b.CreateFNeg(b.CreateFMul(ac, ac))), q);
  Value* large = b.CreateFSub(fconst(x, 1.0), erfc);
  Value* r = b.CreateSelect(b.CreateFCmpOLT(a, fconst(x, 1.0)), small, large);
  r = b.CreateIntrinsic(llvm::Intrinsic::copysign, {x->getType()}, {r, x});
  return keep_nan(b, x, r);
}

Value* emit_fmax_nan(llvm::IRBuilder<>& b, Value* x, Value* y) {
  // select(x >= y, x, y) gives y when either is NaN, which covers a NaN y; a NaN x is kept
  // explicitly. Ties keep x: max(-0.0, +0.0) is -0.0, as PyTorch's relu and clamp give.
  Value* m = b.CreateSelect(b.CreateFCmpOGE(x, y), x, y);
  return b.CreateSelect(b.CreateFCmpUNO(x, x), x, m);
}

Value* emit_fmin_nan(llvm::IRBuilder<>& b, Value* x, Value* y) {
  Value* m = b.CreateSelect(b.CreateFCmpOLE(x, y), x, y);
  return b.CreateSelect(b.CreateFCmpUNO(x, x), x, m);
}

}  // namespace tessera::codegen
