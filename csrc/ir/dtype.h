#pragma once
// Scalar element types of tensors and expressions.
#include <cstdint>
#include <string>

namespace tessera::ir {

enum class DType : uint8_t { kBool, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64 };

int dtype_bytes(DType t);
const char* dtype_name(DType t);
DType dtype_from_name(const std::string& name);  // throws tessera::Error on unknown names
inline bool is_float(DType t) {
  return t == DType::kFloat16 || t == DType::kBFloat16 || t == DType::kFloat32 ||
         t == DType::kFloat64;
}
inline bool is_int(DType t) { return t == DType::kInt32 || t == DType::kInt64; }

// Index arithmetic is always done in 64-bit integers: it keeps the simplifier and the
// codegen free of overflow corner cases for large tensors.
constexpr DType kIndexType = DType::kInt64;

}  // namespace tessera::ir
