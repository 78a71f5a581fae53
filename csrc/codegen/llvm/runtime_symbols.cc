#include "codegen/llvm/runtime_symbols.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "runtime/parallel.h"
#include "runtime/scratch.h"

extern "C" void* tessera_alloc(int64_t bytes) {
  return tessera::runtime::scratch_alloc(bytes <= 0 ? 0 : static_cast<size_t>(bytes));
}

extern "C" void tessera_free(void* ptr) { tessera::runtime::scratch_free(ptr); }

namespace tessera::codegen {

namespace {
// Casts away overload sets: each entry names the exact C signature the code generator declares.
template <typename F>
void* fn_addr(F* f) {
  return reinterpret_cast<void*>(f);
}
}  // namespace

const RuntimeSymbol* runtime_symbols(int* count) {
  static const RuntimeSymbol table[] = {
      {"tessera_parallel_for", fn_addr(&tessera_parallel_for)},
      {"tessera_alloc", fn_addr(&tessera_alloc)},
      {"tessera_free", fn_addr(&tessera_free)},
      {"exp", fn_addr<double(double)>(&::exp)},
      {"log", fn_addr<double(double)>(&::log)},
      {"tanh", fn_addr<double(double)>(&::tanh)},
      {"erf", fn_addr<double(double)>(&::erf)},
      {"pow", fn_addr<double(double, double)>(&::pow)},
      {"powf", fn_addr<float(float, float)>(&::powf)},
      {"expf", fn_addr<float(float)>(&::expf)},
      {"logf", fn_addr<float(float)>(&::logf)},
      {"sqrt", fn_addr<double(double)>(&::sqrt)},
      {"sqrtf", fn_addr<float(float)>(&::sqrtf)},
      {"floor", fn_addr<double(double)>(&::floor)},
      {"floorf", fn_addr<float(float)>(&::floorf)},
      {"ceil", fn_addr<double(double)>(&::ceil)},
      {"ceilf", fn_addr<float(float)>(&::ceilf)},
      {"fmod", fn_addr<double(double, double)>(&::fmod)},
      {"fmodf", fn_addr<float(float, float)>(&::fmodf)},
      {"memcpy", fn_addr<void*(void*, const void*, size_t)>(&::memcpy)},
      {"memmove", fn_addr<void*(void*, const void*, size_t)>(&::memmove)},
      {"memset", fn_addr<void*(void*, int, size_t)>(&::memset)},
  };
  *count = static_cast<int>(sizeof(table) / sizeof(table[0]));
  return table;
}

}  // namespace tessera::codegen
