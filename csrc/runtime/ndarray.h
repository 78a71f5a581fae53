#pragma once
// A small owning host array: the inputs and outputs of the reference interpreter, of tests and
// of JIT-compiled kernels.
//
// Storage is row-major, contiguous and 64-byte aligned (one cache line / one AVX-512 vector), so
// generated kernels may use aligned vector loads on the base pointer. `dtype` and `shape` are
// plain fields for convenience; changing `shape` to a different element count is not allowed
// (the storage keeps its size; accessors check).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ir/dtype.h"
#include "runtime/verify.h"

namespace tessera::runtime {

constexpr size_t kNDArrayAlignment = 64;
// Largest array (1 TiB): a shape past it is an error of the shape, not an allocation to attempt.
constexpr int64_t kMaxNDArrayBytes = int64_t{1} << 40;

class NDArray {
 public:
  ir::DType dtype = ir::DType::kFloat32;
  std::vector<int64_t> shape;

  NDArray() = default;
  // Zero-filled array.
  NDArray(ir::DType dtype, std::vector<int64_t> shape);
  NDArray(const NDArray& other);  // deep copy
  NDArray& operator=(const NDArray& other);
  NDArray(NDArray&&) noexcept = default;
  NDArray& operator=(NDArray&&) noexcept = default;

  // Array filled with uniform random values in [lo, hi] from a fixed seed (see fill_random).
  static NDArray random(ir::DType dtype, std::vector<int64_t> shape, uint64_t seed,
                        double lo = -1.0, double hi = 1.0);

  int ndim() const { return static_cast<int>(shape.size()); }
  int64_t numel() const;  // 1 for a 0-d array
  size_t nbytes() const;
  bool defined() const { return storage_ != nullptr; }

  void* data();
  const void* data() const;
  // Typed pointers; throw tessera::Error when `dtype` does not match.
  float* f32();
  const float* f32() const;
  double* f64();
  const double* f64() const;
  int32_t* i32();
  const int32_t* i32() const;
  int64_t* i64();
  const int64_t* i64() const;

  // Element access by flat (row-major) index, converting from/to the stored dtype. Floats
  // (incl. float16/bfloat16, rounded to nearest even) go through double, integers through int64.
  double get(int64_t flat) const;
  void set(int64_t flat, double value);
  int64_t get_int(int64_t flat) const;
  void set_int(int64_t flat, int64_t value);
  // Row-major flat index of a multi-index (bounds-checked).
  int64_t flat_index(const std::vector<int64_t>& index) const;
  double at(const std::vector<int64_t>& index) const { return get(flat_index(index)); }

  void fill(double value);
  // Uniform values in [lo, hi] from a seeded generator whose sequence does not depend on the
  // standard library, so a seed means the same data on every machine. Integer dtypes draw
  // integers in [ceil(lo), floor(hi)]; bool draws 0/1.
  void fill_random(uint64_t seed, double lo = -1.0, double hi = 1.0);

  // Copy converted to another dtype.
  NDArray astype(ir::DType t) const;
  // "float32[2, 3]"
  std::string describe() const;

 private:
  struct AlignedFree {
    void operator()(std::byte* p) const;
  };
  std::unique_ptr<std::byte, AlignedFree> storage_;
  size_t capacity_ = 0;  // bytes allocated

  void check_flat(int64_t flat) const;
  template <typename T>
  T* typed(ir::DType want) const;
};

// Compares two arrays of the same shape elementwise (numpy.allclose semantics with `want` as the
// reference; see runtime/verify.h). A shape mismatch is a failure with a message saying so.
CompareResult allclose(const NDArray& got, const NDArray& want, double rtol = 1e-4,
                       double atol = 1e-5);

// IEEE half and bfloat16 conversions (round to nearest even), used by NDArray::get/set.
uint16_t float_to_half_bits(float f);
float half_bits_to_float(uint16_t h);
uint16_t float_to_bfloat16_bits(float f);
float bfloat16_bits_to_float(uint16_t h);

}  // namespace tessera::runtime
