#pragma once
// Numerical comparison of a kernel's output against a reference, used to verify a candidate
// before its time counts.
//
// Element i passes when |got - want| <= atol + rtol * |want| (numpy.allclose semantics, asymmetric:
// `want` is the reference). NaN matches NaN; NaN against a number is a mismatch; an infinity
// matches only the same infinity.

#include <cstdint>
#include <string>

namespace tessera::runtime {

struct CompareResult {
  bool ok = true;
  double max_abs_err = 0;    // over elements where both values are finite
  double max_rel_err = 0;    // |got - want| / |want| over finite elements with want != 0
  int64_t worst_index = -1;  // element furthest outside tolerance (or largest error if all pass)
  int64_t mismatches = 0;
  std::string message;  // human-readable summary; names the worst element on failure
};

CompareResult allclose(const float* got, const float* want, int64_t n, double rtol = 1e-4,
                       double atol = 1e-5);
// Reference computed in double (e.g. a naive reference implementation accumulating in double).
CompareResult allclose(const float* got, const double* want, int64_t n, double rtol = 1e-4,
                       double atol = 1e-5);
CompareResult allclose(const double* got, const double* want, int64_t n, double rtol = 1e-4,
                       double atol = 1e-5);

}  // namespace tessera::runtime
