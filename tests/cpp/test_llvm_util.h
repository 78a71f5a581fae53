#pragma once
// Helpers shared by the LLVM code generator tests (test_llvm_*.cc): compact loop-IR builders and
// a way to call a compiled kernel on std::vector data.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "codegen/llvm/compile.h"
#include "ir/buffer.h"
#include "ir/expr.h"
#include "loop/stmt.h"

namespace tessera::codegen::llvm_test {

using ir::Buffer;
using ir::DType;
using ir::Expr;
using ir::Var;
using loop::ForKind;
using loop::LoweredFunc;
using loop::Stmt;

// Loop variable known to be non-negative.
inline Var loop_var(const std::string& name) { return ir::var(name, 0, ir::kNoUpperBound); }

inline Stmt loop(const Var& v, Expr min, Expr extent, ForKind kind, Stmt body) {
  return loop::make_for(v, std::move(min), std::move(extent), kind, std::move(body));
}
inline Stmt serial(const Var& v, Expr extent, Stmt body) {
  return loop(v, Expr(0), std::move(extent), ForKind::kSerial, std::move(body));
}
inline Stmt vectorized(const Var& v, int64_t lanes, Stmt body) {
  return loop(v, Expr(0), Expr(lanes), ForKind::kVectorized, std::move(body));
}
inline Stmt unrolled(const Var& v, int64_t extent, Stmt body) {
  return loop(v, Expr(0), Expr(extent), ForKind::kUnrolled, std::move(body));
}
inline Stmt parallel(const Var& v, Expr extent, Stmt body) {
  return loop(v, Expr(0), std::move(extent), ForKind::kParallel, std::move(body));
}
inline Stmt store(const Buffer& b, Expr index, Expr value) {
  return loop::make_store(b, std::move(index), std::move(value));
}
inline Expr ld(const Buffer& b, Expr index) { return ir::load(b, std::move(index)); }
inline Expr f32(double v) { return ir::float_imm(v, DType::kFloat32); }

inline LoweredFunc make_func(const std::string& name, std::vector<Buffer> args,
                             std::vector<Var> size_vars, Stmt body) {
  LoweredFunc f;
  f.name = name;
  f.args = std::move(args);
  f.size_vars = std::move(size_vars);
  f.body = std::move(body);
  return f;
}

// Occurrences of `what` in `text` (instructions in an assembly listing, say).
inline size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

inline void call(const CompiledKernel& k, std::vector<void*> buffers, std::vector<int64_t> sizes) {
  k(buffers.data(), sizes.data());
}

}  // namespace tessera::codegen::llvm_test
