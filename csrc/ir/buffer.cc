#include "ir/buffer.h"

#include "util/check.h"

namespace tessera::ir {

const char* mem_scope_name(MemScope s) {
  switch (s) {
    case MemScope::kGlobal:
      return "global";
    case MemScope::kHeap:
      return "heap";
    case MemScope::kStack:
      return "stack";
    case MemScope::kRegister:
      return "register";
    case MemScope::kShared:
      return "shared";
  }
  return "?";
}

Buffer make_buffer(const std::string& name, DType dtype, std::vector<Expr> shape, MemScope scope) {
  auto b = std::make_shared<BufferNode>();
  b->name = name;
  b->dtype = dtype;
  b->shape = std::move(shape);
  b->scope = scope;
  return b;
}

Expr buffer_size(const Buffer& b) {
  Expr n = int_imm(1);
  for (const Expr& s : b->shape) n = mul(n, s);
  return n;
}

Expr flat_index(const Buffer& b, const std::vector<Expr>& indices) {
  TESSERA_CHECK(indices.size() == b->shape.size())
      << "buffer " << b->name << " has " << b->shape.size() << " dims, indexed with "
      << indices.size();
  Expr idx = int_imm(0);
  for (size_t i = 0; i < indices.size(); ++i) idx = add(mul(idx, b->shape[i]), indices[i]);
  return idx;
}

}  // namespace tessera::ir
