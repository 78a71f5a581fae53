#include "runtime/verify.h"

#include <cmath>
#include <limits>
#include <sstream>

namespace tessera::runtime {
namespace {

template <typename G, typename W>
CompareResult compare(const G* got, const W* want, int64_t n, double rtol, double atol) {
  CompareResult r;
  // "Badness" = error / allowed error; > 1 fails. The worst element is the one with the largest
  // badness, so a small absolute error on a tiny value can outrank a large one on a huge value.
  double worst_badness = -1;
  int64_t first_mismatch = -1;
  const double inf = std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < n; ++i) {
    const double g = static_cast<double>(got[i]);
    const double w = static_cast<double>(want[i]);
    double badness;
    if (std::isnan(g) || std::isnan(w)) {
      badness = (std::isnan(g) && std::isnan(w)) ? 0.0 : inf;
    } else if (std::isinf(g) || std::isinf(w)) {
      badness = (g == w) ? 0.0 : inf;
    } else {
      const double abs_err = std::fabs(g - w);
      const double allowed = atol + rtol * std::fabs(w);
      if (abs_err > r.max_abs_err) r.max_abs_err = abs_err;
      if (w != 0) {
        const double rel = abs_err / std::fabs(w);
        if (rel > r.max_rel_err) r.max_rel_err = rel;
      }
      // allowed == 0 (atol = rtol = 0 or want = 0 with atol = 0) demands exact equality.
      badness = allowed > 0 ? abs_err / allowed : (abs_err == 0 ? 0.0 : inf);
    }
    if (badness > 1) {
      ++r.mismatches;
      if (first_mismatch < 0) first_mismatch = i;
    }
    if (badness > worst_badness) {
      worst_badness = badness;
      r.worst_index = i;
    }
  }
  r.ok = r.mismatches == 0;
  std::ostringstream msg;
  msg.precision(9);
  if (r.ok) {
    msg << "allclose: " << n << " elements match (max_abs_err=" << r.max_abs_err
        << ", max_rel_err=" << r.max_rel_err << ")";
  } else {
    const int64_t k = r.worst_index;
    msg << "allclose: " << r.mismatches << " of " << n << " elements differ (rtol=" << rtol
        << ", atol=" << atol << "); worst at index " << k << ": got " << static_cast<double>(got[k])
        << ", want " << static_cast<double>(want[k]) << "; first at index " << first_mismatch
        << "; max_abs_err=" << r.max_abs_err << ", max_rel_err=" << r.max_rel_err;
  }
  r.message = msg.str();
  return r;
}

}  // namespace

CompareResult allclose(const float* got, const float* want, int64_t n, double rtol, double atol) {
  return compare(got, want, n, rtol, atol);
}

CompareResult allclose(const float* got, const double* want, int64_t n, double rtol, double atol) {
  return compare(got, want, n, rtol, atol);
}

CompareResult allclose(const double* got, const double* want, int64_t n, double rtol, double atol) {
  return compare(got, want, n, rtol, atol);
}

}  // namespace tessera::runtime
