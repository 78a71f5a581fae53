#pragma once
// C functions that JIT-compiled kernels call, registered in the JIT by absolute address.
#include <cstdint>

extern "C" {
// 64-byte aligned heap memory for kHeap temporaries. Never returns null: on failure it prints a
// message and aborts, since an exception cannot unwind through JIT-compiled frames.
void* tessera_alloc(int64_t bytes);
void tessera_free(void* ptr);
}

namespace tessera::codegen {

struct RuntimeSymbol {
  const char* name;
  void* address;
};

// Everything generated code may reference besides tessera_parallel_for: the allocator above and
// the libm/libc functions used for f64 math, pow and memory intrinsics.
const RuntimeSymbol* runtime_symbols(int* count);

}  // namespace tessera::codegen
