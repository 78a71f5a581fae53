#include "tune/dynamic/selection.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "util/check.h"

namespace tessera::tune::dynamic {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

void check_table(const CostTable& t) {
  TESSERA_CHECK(t.candidates() > 0 && t.points() > 0) << "selection needs a non-empty cost table";
  for (const auto& row : t.ms) {
    TESSERA_CHECK(row.size() == t.points()) << "cost table rows differ in length";
  }
  TESSERA_CHECK(t.weights.empty() || t.weights.size() == t.points())
      << "cost table has " << t.weights.size() << " weights for " << t.points() << " points";
}

bool usable(double ms) { return std::isfinite(ms) && ms > 0; }

std::vector<double> best_per_point(const CostTable& t) {
  std::vector<double> best(t.points(), kInf);
  for (const auto& row : t.ms) {
    for (size_t p = 0; p < row.size(); ++p) {
      if (usable(row[p])) best[p] = std::min(best[p], row[p]);
    }
  }
  for (size_t p = 0; p < best.size(); ++p) {
    TESSERA_CHECK(std::isfinite(best[p])) << "no candidate can run size point " << p;
  }
  return best;
}

bool within(const Selection& s, const SelectionConstants& c) {
  // A tiny slack keeps a bound met exactly from failing on rounding.
  const double eps = 1e-12;
  return s.loss <= c.loss_bound + eps && s.worst_point_loss <= c.point_loss_bound + eps;
}

// Within the bounds: fewer kernels, then less loss. Past them (only the cap puts a selection
// there): less loss, then fewer kernels.
bool better(const Selection& a, const Selection& b, bool within_bounds) {
  if (within_bounds && a.kernels.size() != b.kernels.size()) {
    return a.kernels.size() < b.kernels.size();
  }
  if (a.loss != b.loss) return a.loss < b.loss;
  return a.kernels.size() < b.kernels.size();
}

// Drops kernels, least harmful first, while the bounds hold; then down to the cap regardless.
Selection prune(const CostTable& t, Selection s, const SelectionConstants& c) {
  auto drop_least_harmful = [&](bool keep_bounds) {
    if (s.kernels.size() <= 1) return false;
    Selection best_without;
    bool found = false;
    for (size_t i = 0; i < s.kernels.size(); ++i) {
      std::vector<int> rest = s.kernels;
      rest.erase(rest.begin() + static_cast<std::ptrdiff_t>(i));
      Selection cand;
      try {
        cand = evaluate_selection(t, rest);
      } catch (const Error&) {
        continue;  // some point needs the dropped kernel (the others cannot run it)
      }
      if (keep_bounds && !within(cand, c)) continue;
      if (!found || cand.loss < best_without.loss) {
        best_without = cand;
        found = true;
      }
    }
    if (found) s = best_without;
    return found;
  };
  while (drop_least_harmful(true)) {
  }
  while (static_cast<int>(s.kernels.size()) > c.max_kernels && drop_least_harmful(false)) {
  }
  return s;
}

}  // namespace

std::vector<std::vector<int>> top_k_votes(const CostTable& t, int k) {
  check_table(t);
  std::vector<std::vector<int>> votes(t.points());
  std::vector<int> order(t.candidates());
  for (size_t p = 0; p < t.points(); ++p) {
    std::iota(order.begin(), order.end(), 0);
    // Stable: equal times vote for the lower index, so results do not depend on sort internals.
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return t.ms[a][p] < t.ms[b][p]; });
    for (int c : order) {
      if (static_cast<int>(votes[p].size()) >= k) break;
      if (usable(t.ms[c][p])) votes[p].push_back(c);
    }
  }
  return votes;
}

std::vector<int> greedy_cover(const CostTable& t, const std::vector<std::vector<int>>& votes) {
  const std::vector<double> best = best_per_point(t);
  std::vector<bool> covered(t.points(), false);
  std::vector<int> picked;
  for (;;) {
    std::vector<double> gain(t.candidates(), 0.0);
    for (size_t p = 0; p < t.points(); ++p) {
      if (covered[p]) continue;
      for (int c : votes[p]) gain[c] += t.weight(p) * best[p] / t.ms[c][p];
    }
    const auto top = std::max_element(gain.begin(), gain.end());
    if (*top <= 0) break;  // every point covered (or none voted: nothing more can cover it)
    const int c = static_cast<int>(top - gain.begin());
    picked.push_back(c);
    for (size_t p = 0; p < t.points(); ++p) {
      if (std::find(votes[p].begin(), votes[p].end(), c) != votes[p].end()) covered[p] = true;
    }
  }
  return picked;
}

Selection evaluate_selection(const CostTable& t, std::vector<int> kernels) {
  check_table(t);
  TESSERA_CHECK(!kernels.empty()) << "a selection needs at least one kernel";
  std::sort(kernels.begin(), kernels.end());
  kernels.erase(std::unique(kernels.begin(), kernels.end()), kernels.end());
  const std::vector<double> best = best_per_point(t);
  Selection s;
  s.kernels = kernels;
  s.assignment.assign(t.points(), -1);
  double log_sum = 0, weight_sum = 0;
  for (size_t p = 0; p < t.points(); ++p) {
    double fastest = kInf;
    for (size_t i = 0; i < kernels.size(); ++i) {
      const double ms = t.ms[kernels[i]][p];
      if (usable(ms) && ms < fastest) {
        fastest = ms;
        s.assignment[p] = static_cast<int>(i);
      }
    }
    TESSERA_CHECK(s.assignment[p] >= 0) << "no selected kernel can run size point " << p;
    const double ratio = fastest / best[p];
    log_sum += t.weight(p) * std::log(ratio);
    weight_sum += t.weight(p);
    s.worst_point_loss = std::max(s.worst_point_loss, ratio - 1);
  }
  s.loss = std::exp(log_sum / weight_sum) - 1;
  return s;
}

Selection select_kernels(const CostTable& t, const SelectionConstants& c) {
  check_table(t);
  TESSERA_CHECK(c.max_top_k >= 1 && c.max_kernels >= 1) << "selection constants must be >= 1";
  Selection chosen;
  bool have = false;
  for (int k = 1; k <= c.max_top_k && k <= static_cast<int>(t.candidates()); ++k) {
    Selection s = prune(t, evaluate_selection(t, greedy_cover(t, top_k_votes(t, k))), c);
    s.top_k = k;
    // A cover within the bounds beats one past them; then see `better`.
    const bool ok = within(s, c), chosen_ok = have && within(chosen, c);
    if (!have || (ok && !chosen_ok) || (ok == chosen_ok && better(s, chosen, ok))) {
      chosen = s;
      have = true;
    }
  }
  return chosen;
}

}  // namespace tessera::tune::dynamic
