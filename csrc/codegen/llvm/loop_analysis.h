#pragma once
// Small analyses of loop IR that the LLVM code generator needs: exact expression equality, lane
// strides of vectorized accesses, whether a vectorized body may run lane-wise in SIMD, and which
// variables/buffers a statement reads (the live-ins of an outlined parallel body).
#include <optional>
#include <string>
#include <vector>

#include "ir/functor.h"
#include "loop/stmt.h"

namespace tessera::codegen {

// Exact equality: same structure, same variables (by identity), same buffers (by identity).
// Unlike ir::structural_equal this does not identify renamed variables, which would be unsound
// for dependence tests.
bool expr_equal(const ir::Expr& a, const ir::Expr& b);

// If `e` is affine in `var` with a constant coefficient (e = base + stride*var, base free of
// var), the stride; otherwise nullopt. `defs` maps Let variables to their definitions (already
// expressed in terms of `var` and other free variables); they are looked through.
std::optional<int64_t> lane_stride(const ir::Expr& e, const ir::ExprNode* var,
                                   const ir::VarMap& defs);

// True if any node in `e` is a kLoad.
bool contains_load(const ir::Expr& e);

// Largest extent fully unrolled at code generation time; longer kUnrolled loops stay loops.
constexpr int64_t kMaxFullUnroll = 512;

// Whether the body of a kVectorized loop over `var` (`lanes` iterations) may be emitted once in
// SIMD form with the same result as running its iterations in order. Allowed: stores, lets,
// ifs, sequences and constant-extent kUnrolled loops. For each buffer that is written, no lane
// may touch an element another lane writes: either every access uses the same index with a
// non-zero constant lane stride, or (unrolled copies) all accesses share one constant stride and
// their bases differ by constants that keep lanes apart, or the buffer is written by a single
// store and never read (scatter order then matches iteration order). On failure `why` says what
// blocked it.
bool can_vectorize_body(const loop::Stmt& body, const ir::Var& var, int64_t lanes,
                        std::string* why);

// Variables (kVar nodes) and buffers a statement mentions, each once, in first-use order.
// Includes buffers it allocates and variables it binds itself.
struct UsedNames {
  std::vector<ir::Var> vars;
  std::vector<ir::Buffer> buffers;
};
UsedNames collect_used_names(const loop::Stmt& s);

}  // namespace tessera::codegen
