// The compile call rejects reads that provably leave their tensor's shape (ir/read_bounds.h)
// instead of reading other memory, and accepts every guarded or in-bounds read.
#include <gtest/gtest.h>

#include "compiler/compile.h"
#include "const_dims.h"
#include "derive/choose.h"
#include "derive/expressions.h"
#include "ir/read_bounds.h"
#include "ops/ops.h"
#include "util/check.h"

namespace tessera {
namespace {

using ir::Tensor;
using testing::dims;

// The message of the error `f` throws ("" when it throws none).
template <typename F>
std::string error_of(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ReadBounds, EinNetFormBandMatmulIsRejectedWithTheRangeItReads) {
  Tensor a = ir::placeholder("A", dims({2, 40, 8})), b = ir::placeholder("B", dims({2, 40, 8}));
  Tensor g = derive::g2bmm_expr(a, b, 4, 2);  // B[.., m + 2 * (w - 4), ..]: rows -8 .. 47
  const std::string msg = error_of([&] { compiler::compile({g}, {a, b}, {}); });
  EXPECT_NE(msg.find("reads B outside its shape"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[-8, 47]"), std::string::npos) << msg;
  // Through explicit padding (what _C.derive compiles) the same program builds.
  const derive::State padded = derive::explicit_padding(derive::State{{g}, {}});
  EXPECT_NO_THROW(compiler::compile(padded.outputs, {a, b}, {}));
}

TEST(ReadBounds, ShiftedReadPastTheEndIsRejected) {
  Tensor a = ir::placeholder("A", dims({16}));
  Tensor s = ir::compute("S", dims({16}), [&](const std::vector<ir::Var>& i) {
    return ir::access(a, {i[0] + ir::int_imm(1)});
  });
  EXPECT_THROW(ir::check_reads_within_shapes({s}), Error);
  // Over one point fewer, every read is inside.
  Tensor t = ir::compute("T", dims({15}), [&](const std::vector<ir::Var>& i) {
    return ir::access(a, {i[0] + ir::int_imm(1)});
  });
  EXPECT_NO_THROW(ir::check_reads_within_shapes({t}));
}

TEST(ReadBounds, ReadsUnderASelectAreGuardedByIt) {
  Tensor a = ir::placeholder("A", dims({16}));
  Tensor s = ir::compute("S", dims({16}), [&](const std::vector<ir::Var>& i) {
    return ir::select(ir::ge(i[0], ir::int_imm(1)), ir::access(a, {i[0] - ir::int_imm(1)}),
                      ir::float_imm(0.0));
  });
  EXPECT_NO_THROW(ir::check_reads_within_shapes({s}));
}

TEST(ReadBounds, LibraryOperatorsWithPaddingPass) {
  Tensor x = ir::placeholder("X", dims({1, 3, 9, 9})), w = ir::placeholder("W", dims({4, 3, 3, 3}));
  EXPECT_NO_THROW(ir::check_reads_within_shapes({ops::conv2d(x, w, nullptr, {2, 2}, {1, 1})}));
  Tensor p = ir::placeholder("P", dims({8, 5})), q = ir::placeholder("Q", dims({5, 7}));
  EXPECT_NO_THROW(ir::check_reads_within_shapes({ops::matmul(p, q)}));
}

}  // namespace
}  // namespace tessera
