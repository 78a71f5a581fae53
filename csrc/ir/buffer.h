#pragma once
// Flat memory buffers read and written by the loop IR.
#include <string>
#include <vector>

#include "ir/expr.h"

namespace tessera::ir {

enum class MemScope : uint8_t {
  kGlobal,    // kernel argument: memory owned by the caller
  kHeap,      // temporary allocated by the kernel (large, e.g. packed operands, intermediates)
  kStack,     // small fixed-size temporary on the stack of the current thread
  kRegister,  // small fixed-size temporary meant to live in registers (accumulator tiles)
  kShared,    // GPU: fixed-size temporary shared by the threads of one block (__shared__)
};
const char* mem_scope_name(MemScope s);

struct BufferNode {
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<Expr> shape;  // logical shape (row-major); loads/stores use flat indices
  MemScope scope = MemScope::kGlobal;
};

Buffer make_buffer(const std::string& name, DType dtype, std::vector<Expr> shape,
                   MemScope scope = MemScope::kGlobal);
// Product of the shape (element count), folded when constant.
Expr buffer_size(const Buffer& b);
// Row-major flat index of `indices` into `b`'s shape.
Expr flat_index(const Buffer& b, const std::vector<Expr>& indices);

}  // namespace tessera::ir
