#include "tune/search/model_eval.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace tessera::tune::search {

namespace {

// Ranks 1..n, ties sharing the average of their positions.
std::vector<double> ranks(const std::vector<double>& v) {
  std::vector<size_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
    const double avg = (static_cast<double>(i) + static_cast<double>(j)) / 2 + 1;
    for (size_t k = i; k <= j; ++k) r[order[k]] = avg;
    i = j + 1;
  }
  return r;
}

double pearson(const std::vector<double>& a, const std::vector<double>& b) {
  const double n = static_cast<double>(a.size());
  const double ma = std::accumulate(a.begin(), a.end(), 0.0) / n;
  const double mb = std::accumulate(b.begin(), b.end(), 0.0) / n;
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    sab += (a[i] - ma) * (b[i] - mb);
    saa += (a[i] - ma) * (a[i] - ma);
    sbb += (b[i] - mb) * (b[i] - mb);
  }
  return saa > 0 && sbb > 0 ? sab / std::sqrt(saa * sbb) : 0;
}

}  // namespace

double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size() || a.size() < 2) return 0;
  return pearson(ranks(a), ranks(b));
}

std::vector<double> heldout_spearman(const std::vector<MeasuredPrograms>& tasks,
                                     const cost::XGBOptions& options) {
  std::vector<double> out;
  for (size_t held = 0; held < tasks.size(); ++held) {
    cost::TrainingSet train;
    for (size_t t = 0; t < tasks.size(); ++t) {
      if (t == held) continue;
      for (size_t p = 0; p < tasks[t].programs.size(); ++p)
        train.add(tasks[t].task, tasks[t].programs[p], tasks[t].throughputs[p]);
    }
    std::vector<cost::ProgramFeatures> test;
    std::vector<double> measured;
    for (size_t p = 0; p < tasks[held].programs.size(); ++p) {
      if (tasks[held].throughputs[p] <= 0) continue;
      test.push_back(tasks[held].programs[p]);
      measured.push_back(tasks[held].throughputs[p]);
    }
    if (train.size() == 0 || test.size() < 2) {
      out.push_back(std::numeric_limits<double>::quiet_NaN());
      continue;
    }
    cost::XGBModel model(options);
    model.fit(train.programs(), train.labels());
    out.push_back(spearman(model.predict(test), measured));
  }
  return out;
}

}  // namespace tessera::tune::search
