#include "runtime/ndarray.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>

#include "util/check.h"

namespace tessera::runtime {

using ir::DType;

// ---- float16 / bfloat16 ---------------------------------------------------------------------

uint16_t float_to_half_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof(x));
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t exp = (x >> 23) & 0xffu;
  uint32_t mant = x & 0x7fffffu;
  if (exp == 0xffu) {  // inf stays inf; NaN stays a (quiet) NaN
    return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u | (mant >> 13) : 0u));
  }
  const int e = static_cast<int>(exp) - 127 + 15;  // re-biased exponent
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  if (e <= 0) {
    // Result is a half subnormal (or zero): value / 2^-24 = (1.mant) * 2^(e - 14 + 23).
    if (e < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    const int shift = 14 - e;
    uint32_t h = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u);
    const uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (h & 1u))) ++h;  // a carry makes it normal: correct
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = sign | (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry into inf is correct too
  return static_cast<uint16_t>(h);
}

float half_bits_to_float(uint16_t h) {
  const uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    const float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  uint32_t bits;
  if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 112u) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

uint16_t float_to_bfloat16_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof(x));
  if (std::isnan(f)) return static_cast<uint16_t>(((x >> 16) & 0x8000u) | 0x7fc0u);
  x += 0x7fffu + ((x >> 16) & 1u);  // round to nearest even on the dropped 16 bits
  return static_cast<uint16_t>(x >> 16);
}

float bfloat16_bits_to_float(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

// ---- NDArray --------------------------------------------------------------------------------

void NDArray::AlignedFree::operator()(std::byte* p) const { std::free(p); }

NDArray::NDArray(DType dtype_, std::vector<int64_t> shape_)
    : dtype(dtype_), shape(std::move(shape_)) {
  // The element and byte counts must not wrap around: a wrapped product would allocate an
  // array smaller than its shape.
  int64_t bytes_needed = ir::dtype_bytes(dtype);
  for (int64_t d : shape) {
    TESSERA_CHECK(d >= 0) << "NDArray: negative dimension in " << describe();
    TESSERA_CHECK(!__builtin_mul_overflow(bytes_needed, d, &bytes_needed) &&
                  bytes_needed <= kMaxNDArrayBytes)
        << "NDArray: shape " << describe() << " is larger than " << kMaxNDArrayBytes << " bytes";
  }
  const size_t bytes = nbytes();
  // aligned_alloc needs a size that is a multiple of the alignment (and > 0 to be useful).
  capacity_ = std::max<size_t>(
      kNDArrayAlignment, (bytes + kNDArrayAlignment - 1) / kNDArrayAlignment * kNDArrayAlignment);
  void* p = std::aligned_alloc(kNDArrayAlignment, capacity_);
  TESSERA_CHECK(p != nullptr) << "NDArray: out of memory allocating " << capacity_ << " bytes";
  std::memset(p, 0, capacity_);
  storage_.reset(static_cast<std::byte*>(p));
}

NDArray::NDArray(const NDArray& other) : dtype(other.dtype), shape(other.shape) {
  if (!other.defined()) return;
  NDArray tmp(dtype, shape);
  std::memcpy(tmp.storage_.get(), other.storage_.get(), other.nbytes());
  storage_ = std::move(tmp.storage_);
  capacity_ = tmp.capacity_;
}

NDArray& NDArray::operator=(const NDArray& other) {
  if (this != &other) {
    NDArray tmp(other);
    *this = std::move(tmp);
  }
  return *this;
}

NDArray NDArray::random(DType dtype, std::vector<int64_t> shape, uint64_t seed, double lo,
                        double hi) {
  NDArray a(dtype, std::move(shape));
  a.fill_random(seed, lo, hi);
  return a;
}

int64_t NDArray::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

size_t NDArray::nbytes() const {
  return static_cast<size_t>(numel()) * static_cast<size_t>(ir::dtype_bytes(dtype));
}

void* NDArray::data() {
  TESSERA_CHECK(nbytes() <= capacity_)
      << "NDArray: shape " << describe() << " needs more storage than was allocated";
  return storage_.get();
}

const void* NDArray::data() const { return const_cast<NDArray*>(this)->data(); }

template <typename T>
T* NDArray::typed(DType want) const {
  TESSERA_CHECK(dtype == want) << "NDArray: requested " << ir::dtype_name(want) << " data from a "
                               << describe() << " array";
  return reinterpret_cast<T*>(const_cast<void*>(data()));
}

float* NDArray::f32() { return typed<float>(DType::kFloat32); }
const float* NDArray::f32() const { return typed<float>(DType::kFloat32); }
double* NDArray::f64() { return typed<double>(DType::kFloat64); }
const double* NDArray::f64() const { return typed<double>(DType::kFloat64); }
int32_t* NDArray::i32() { return typed<int32_t>(DType::kInt32); }
const int32_t* NDArray::i32() const { return typed<int32_t>(DType::kInt32); }
int64_t* NDArray::i64() { return typed<int64_t>(DType::kInt64); }
const int64_t* NDArray::i64() const { return typed<int64_t>(DType::kInt64); }

void NDArray::check_flat(int64_t flat) const {
  TESSERA_CHECK(flat >= 0 && flat < numel())
      << "NDArray: flat index " << flat << " out of range for " << describe();
}

double NDArray::get(int64_t flat) const {
  check_flat(flat);
  const std::byte* p = static_cast<const std::byte*>(data());
  switch (dtype) {
    case DType::kFloat32:
      return reinterpret_cast<const float*>(p)[flat];
    case DType::kFloat64:
      return reinterpret_cast<const double*>(p)[flat];
    case DType::kFloat16:
      return half_bits_to_float(reinterpret_cast<const uint16_t*>(p)[flat]);
    case DType::kBFloat16:
      return bfloat16_bits_to_float(reinterpret_cast<const uint16_t*>(p)[flat]);
    default:
      return static_cast<double>(get_int(flat));
  }
}

void NDArray::set(int64_t flat, double value) {
  check_flat(flat);
  std::byte* p = static_cast<std::byte*>(data());
  switch (dtype) {
    case DType::kFloat32:
      reinterpret_cast<float*>(p)[flat] = static_cast<float>(value);
      return;
    case DType::kFloat64:
      reinterpret_cast<double*>(p)[flat] = value;
      return;
    case DType::kFloat16:
      reinterpret_cast<uint16_t*>(p)[flat] = float_to_half_bits(static_cast<float>(value));
      return;
    case DType::kBFloat16:
      reinterpret_cast<uint16_t*>(p)[flat] = float_to_bfloat16_bits(static_cast<float>(value));
      return;
    default:
      TESSERA_CHECK(std::isfinite(value))
          << "NDArray: cannot store " << value << " in a " << describe() << " array";
      set_int(flat, static_cast<int64_t>(std::trunc(value)));
  }
}

int64_t NDArray::get_int(int64_t flat) const {
  check_flat(flat);
  const std::byte* p = static_cast<const std::byte*>(data());
  switch (dtype) {
    case DType::kBool:
      return reinterpret_cast<const uint8_t*>(p)[flat] != 0;
    case DType::kInt32:
      return reinterpret_cast<const int32_t*>(p)[flat];
    case DType::kInt64:
      return reinterpret_cast<const int64_t*>(p)[flat];
    default:
      return static_cast<int64_t>(std::trunc(get(flat)));
  }
}

void NDArray::set_int(int64_t flat, int64_t value) {
  check_flat(flat);
  std::byte* p = static_cast<std::byte*>(data());
  switch (dtype) {
    case DType::kBool:
      reinterpret_cast<uint8_t*>(p)[flat] = value != 0;
      return;
    case DType::kInt32:
      reinterpret_cast<int32_t*>(p)[flat] = static_cast<int32_t>(value);
      return;
    case DType::kInt64:
      reinterpret_cast<int64_t*>(p)[flat] = value;
      return;
    default:
      set(flat, static_cast<double>(value));
  }
}

int64_t NDArray::flat_index(const std::vector<int64_t>& index) const {
  TESSERA_CHECK(index.size() == shape.size())
      << "NDArray: " << index.size() << " indices for " << describe();
  int64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    TESSERA_CHECK(index[d] >= 0 && index[d] < shape[d])
        << "NDArray: index " << index[d] << " out of range in dim " << d << " of " << describe();
    flat = flat * shape[d] + index[d];
  }
  return flat;
}

void NDArray::fill(double value) {
  // The first element converts the value (and checks it fits the dtype); the rest copy its bytes,
  // doubling the filled prefix each step.
  const int64_t n = numel();
  if (n == 0 || !defined()) return;
  set(0, value);
  std::byte* p = static_cast<std::byte*>(data());
  const size_t total = nbytes();
  for (size_t done = total / static_cast<size_t>(n); done < total; done *= 2) {
    std::memcpy(p + done, p, std::min(done, total - done));
  }
}

void NDArray::fill_random(uint64_t seed, double lo, double hi) {
  TESSERA_CHECK(lo <= hi) << "fill_random: empty range [" << lo << ", " << hi << "]";
  // mt19937_64's output sequence is fixed by the C++ standard; the distributions are not, so the
  // mapping to [lo, hi] is done by hand.
  std::mt19937_64 gen(seed);
  const int64_t n = numel();
  if (ir::is_float(dtype)) {
    for (int64_t i = 0; i < n; ++i) {
      const double u = static_cast<double>(gen() >> 11) * 0x1.0p-53;  // [0, 1)
      set(i, lo + (hi - lo) * u);
    }
    return;
  }
  int64_t ilo = static_cast<int64_t>(std::ceil(lo));
  int64_t ihi = static_cast<int64_t>(std::floor(hi));
  if (dtype == DType::kBool) {
    ilo = 0;
    ihi = 1;
  }
  TESSERA_CHECK(ilo <= ihi) << "fill_random: no integer in [" << lo << ", " << hi << "]";
  const uint64_t span = static_cast<uint64_t>(ihi - ilo) + 1;
  for (int64_t i = 0; i < n; ++i) set_int(i, ilo + static_cast<int64_t>(gen() % span));
}

NDArray NDArray::astype(DType t) const {
  NDArray out(t, shape);
  const bool ints = !ir::is_float(t) && !ir::is_float(dtype);
  for (int64_t i = 0, n = numel(); i < n; ++i) {
    if (ints) {
      out.set_int(i, get_int(i));
    } else {
      out.set(i, get(i));
    }
  }
  return out;
}

std::string NDArray::describe() const {
  std::ostringstream os;
  os << ir::dtype_name(dtype) << "[";
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << "]";
  return os.str();
}

CompareResult allclose(const NDArray& got, const NDArray& want, double rtol, double atol) {
  if (got.shape != want.shape) {
    CompareResult r;
    r.ok = false;
    r.message = "allclose: shape mismatch: got " + got.describe() + ", want " + want.describe();
    return r;
  }
  const int64_t n = got.numel();
  std::vector<double> g(n), w(n);
  for (int64_t i = 0; i < n; ++i) {
    g[i] = got.get(i);
    w[i] = want.get(i);
  }
  return allclose(g.data(), w.data(), n, rtol, atol);
}

}  // namespace tessera::runtime
