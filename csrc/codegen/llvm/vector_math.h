#pragma once
// fp32 transcendental functions emitted inline as LLVM IR, for scalars and vectors alike.
//
// Why not libm: a vectorised loop would otherwise call expf once per lane. These are branch-free
// polynomial approximations (selects instead of branches), so one <16 x float> call costs a few
// dozen vector instructions. Target accuracy is a couple of ulp over the whole fp32 range,
// including overflow, underflow to denormals and zero, +-inf and NaN (propagated).
//
// Each function accepts a `float` or `<N x float>` value and returns the same type. The builder
// should carry the FP contraction flag (fmuladd is used explicitly for Horner steps anyway).
#include <llvm/IR/IRBuilder.h>

namespace tessera::codegen {

llvm::Value* emit_exp_f32(llvm::IRBuilder<>& b, llvm::Value* x);
llvm::Value* emit_log_f32(llvm::IRBuilder<>& b, llvm::Value* x);
llvm::Value* emit_tanh_f32(llvm::IRBuilder<>& b, llvm::Value* x);
llvm::Value* emit_erf_f32(llvm::IRBuilder<>& b, llvm::Value* x);
llvm::Value* emit_sigmoid_f32(llvm::IRBuilder<>& b, llvm::Value* x);

// NaN-propagating max/min (torch semantics: NaN if either operand is NaN), any float type.
llvm::Value* emit_fmax_nan(llvm::IRBuilder<>& b, llvm::Value* x, llvm::Value* y);
llvm::Value* emit_fmin_nan(llvm::IRBuilder<>& b, llvm::Value* x, llvm::Value* y);

}  // namespace tessera::codegen
