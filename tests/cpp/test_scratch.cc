// Scratch memory for kernel temporaries: alignment, reuse of freed large blocks by size, the
// small-block pass-through, and releasing the cache.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "runtime/scratch.h"

namespace tessera::runtime {
namespace {

TEST(Scratch, BlocksAreAlignedAndWritable) {
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{100}, size_t{1} << 20}) {
    void* p = scratch_alloc(bytes);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << bytes;
    std::memset(p, 0xab, bytes);
    scratch_free(p);
  }
  scratch_free(nullptr);  // ignored
}

TEST(Scratch, LargeBlocksAreReusedBySize) {
  scratch_release_cached();
  const size_t big = 3 << 20;
  void* a = scratch_alloc(big);
  scratch_free(a);
  EXPECT_GE(scratch_cached_bytes(), big);
  void* other = scratch_alloc(big / 2);  // another size does not take it
  EXPECT_NE(other, a);
  void* b = scratch_alloc(big);  // the same size does
  EXPECT_EQ(b, a);
  scratch_free(b);
  scratch_free(other);
  scratch_release_cached();
  EXPECT_EQ(scratch_cached_bytes(), 0u);
}

TEST(Scratch, SmallBlocksAreNotCached) {
  scratch_release_cached();
  void* p = scratch_alloc(1000);
  scratch_free(p);
  EXPECT_EQ(scratch_cached_bytes(), 0u);
}

}  // namespace
}  // namespace tessera::runtime
