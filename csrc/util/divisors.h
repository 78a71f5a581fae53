#pragma once
// Integer divisors, for tile sizes that split an extent exactly.
#include <algorithm>
#include <cstdint>
#include <vector>

namespace tessera::util {

// Divisors of x (x >= 1), ascending.
inline std::vector<int64_t> divisors(int64_t x) {
  std::vector<int64_t> d;
  for (int64_t k = 1; k * k <= x; ++k) {
    if (x % k != 0) continue;
    d.push_back(k);
    if (k * k != x) d.push_back(x / k);
  }
  std::sort(d.begin(), d.end());
  return d;
}

}  // namespace tessera::util
