#pragma once
// Scratch memory for kernel temporaries (intermediate stages, packed operands).
//
// A kernel allocates its temporaries on every call. Large blocks from malloc come from fresh
// mmap'd pages each time, and touching them costs a page fault per 4 KiB: 750 faults and
// ~1 ms per call for a 512x768 softmax's two 1.5 MiB buffers, several times the kernel's own
// work. Freed blocks of 64 KiB and more are therefore kept (up to a cap) and handed out again to
// the next request of the same size, which a kernel called in a loop always makes.
#include <cstddef>

namespace tessera::runtime {

// 64-byte aligned block of at least `bytes` bytes (bytes may be 0). Aborts when out of memory
// (kernels cannot report errors).
void* scratch_alloc(size_t bytes);
// Returns a block from scratch_alloc (null is ignored).
void scratch_free(void* p);

// Bytes held in the cache, and a way to give them back (tests, memory pressure).
size_t scratch_cached_bytes();
void scratch_release_cached();

}  // namespace tessera::runtime
