// NDArray::fill: every element of every dtype takes the value (the fill copies the first
// element's bytes over the rest, doubling; the odd sizes make the last copy partial). Shapes
// whose size wraps around or passes kMaxNDArrayBytes are refused before anything is allocated.
#include <gtest/gtest.h>

#include <cmath>

#include "runtime/ndarray.h"
#include "util/check.h"

namespace tessera::runtime {
namespace {

TEST(NDArray, FillReachesEveryElementOfEveryDtype) {
  for (const ir::DType t :
       {ir::DType::kFloat32, ir::DType::kFloat64, ir::DType::kFloat16, ir::DType::kBFloat16,
        ir::DType::kInt32, ir::DType::kInt64, ir::DType::kBool}) {
    for (const int64_t n : {1, 2, 3, 7, 64, 1001}) {
      NDArray a = NDArray::random(t, {n}, 5);
      const double value = t == ir::DType::kBool ? 1.0 : -3.0;
      a.fill(value);
      for (int64_t e = 0; e < n; ++e) {
        ASSERT_EQ(a.get(e), value) << a.describe() << " element " << e;
      }
    }
  }
}

TEST(NDArray, FillOfAnEmptyArrayIsANoOpAndAnUnrepresentableValueAnError) {
  NDArray empty(ir::DType::kFloat32, {0, 4});
  EXPECT_NO_THROW(empty.fill(1.0));
  NDArray ints(ir::DType::kInt32, {3});
  EXPECT_THROW(ints.fill(std::nan("")), Error);
}

TEST(NDArray, ShapesTooLargeToAllocateAreErrors) {
  // 4^32 elements: the product wraps to 0 in 64 bits, which must not allocate an empty array.
  EXPECT_THROW(NDArray(ir::DType::kFloat32, std::vector<int64_t>(32, 4)), Error);
  EXPECT_THROW(NDArray(ir::DType::kFloat32, {int64_t{1} << 20, int64_t{1} << 20}), Error);
  EXPECT_EQ(NDArray(ir::DType::kFloat32, std::vector<int64_t>(8, 4)).numel(), 65536);
}

}  // namespace
}  // namespace tessera::runtime
