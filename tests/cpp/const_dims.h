#pragma once
// Constant shapes for tests: dims({2, 3}) -> {int_imm(2), int_imm(3)}.
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "ir/expr.h"

namespace tessera::testing {

inline std::vector<ir::Expr> dims(std::initializer_list<int64_t> d) {
  std::vector<ir::Expr> out;
  for (int64_t x : d) out.push_back(ir::int_imm(x));
  return out;
}

}  // namespace tessera::testing
