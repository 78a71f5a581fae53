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

// Masked vector loads in an x86 (AT&T) assembly listing, in either ISA's form: AVX-512's
// zero-masked instructions ("{z}"), or AVX2's vmaskmovps/vmaskmovpd/vpmaskmovd/vpmaskmovq with
// a memory source (their register-source form is a masked store). A full load followed by a
// blend is not one: it reads every lane.
inline size_t count_masked_loads(const std::string& text) {
  static const char* const kAvx2[] = {"vmaskmovps", "vmaskmovpd", "vpmaskmovd", "vpmaskmovq"};
  size_t n = 0;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(begin, end - begin);
    begin = end + 1;
    if (line.find("{z}") != std::string::npos) {
      ++n;
      continue;
    }
    const size_t op = line.find_first_not_of(" \t");
    if (op == std::string::npos) continue;
    for (const char* m : kAvx2) {
      const std::string mnemonic = m;
      if (line.compare(op, mnemonic.size(), mnemonic) != 0) continue;
      const size_t arg = line.find_first_not_of(" \t", op + mnemonic.size());
      if (arg != std::string::npos && line[arg] != '%') ++n;
    }
  }
  return n;
}

inline void call(const CompiledKernel& k, std::vector<void*> buffers, std::vector<int64_t> sizes) {
  k(buffers.data(), sizes.data());
}

}  // namespace tessera::codegen::llvm_test
