#include "runtime/scratch.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>

namespace tessera::runtime {
namespace {

constexpr size_t kAlign = 64;
constexpr size_t kHeader = kAlign;                 // holds the block's size, keeps alignment
constexpr size_t kCacheFrom = 64 * 1024;           // smaller blocks go straight back to malloc
constexpr size_t kCacheLimit = size_t{512} << 20;  // most bytes kept for reuse

struct Cache {
  std::mutex mu;
  std::multimap<size_t, void*> blocks;  // size -> raw block
  size_t bytes = 0;
};

// Never destroyed: kernels may free scratch during static destruction.
Cache& cache() {
  static Cache* c = new Cache;
  return *c;
}

size_t rounded(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

}  // namespace

void* scratch_alloc(size_t bytes) {
  const size_t size = rounded(bytes == 0 ? 1 : bytes);
  if (size >= kCacheFrom) {
    Cache& c = cache();
    std::lock_guard<std::mutex> lock(c.mu);
    auto it = c.blocks.find(size);
    if (it != c.blocks.end()) {
      void* raw = it->second;
      c.blocks.erase(it);
      c.bytes -= size;
      return static_cast<char*>(raw) + kHeader;
    }
  }
  void* raw = std::aligned_alloc(kAlign, size + kHeader);
  if (raw == nullptr) {
    std::fprintf(stderr, "tessera: out of memory allocating %zu bytes in a kernel\n", bytes);
    std::abort();
  }
  *static_cast<size_t*>(raw) = size;
  return static_cast<char*>(raw) + kHeader;
}

void scratch_free(void* p) {
  if (p == nullptr) return;
  void* raw = static_cast<char*>(p) - kHeader;
  const size_t size = *static_cast<size_t*>(raw);
  if (size >= kCacheFrom) {
    Cache& c = cache();
    std::lock_guard<std::mutex> lock(c.mu);
    if (c.bytes + size <= kCacheLimit) {
      c.blocks.emplace(size, raw);
      c.bytes += size;
      return;
    }
  }
  std::free(raw);
}

size_t scratch_cached_bytes() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.bytes;
}

void scratch_release_cached() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  for (auto& [size, raw] : c.blocks) std::free(raw);
  c.blocks.clear();
  c.bytes = 0;
}

}  // namespace tessera::runtime
