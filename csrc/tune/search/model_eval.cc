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

namespace {

// The valid programs of `t` from position `from` on, and their throughputs.
void valid_programs(const MeasuredPrograms& t, size_t from,
                    std::vector<cost::ProgramFeatures>* programs, std::vector<double>* measured) {
  for (size_t p = from; p < t.programs.size(); ++p) {
    if (t.throughputs[p] <= 0) continue;
    programs->push_back(t.programs[p]);
    measured->push_back(t.throughputs[p]);
  }
}

double fitted_spearman(const cost::TrainingSet& train,
                       const std::vector<cost::ProgramFeatures>& test,
                       const std::vector<double>& measured, const cost::XGBOptions& options) {
  if (train.size() == 0 || test.size() < 2) return std::numeric_limits<double>::quiet_NaN();
  cost::XGBModel model(options);
  model.fit(train.programs(), train.labels(), train.groups());
  return spearman(model.predict(test), measured);
}

}  // namespace

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
    valid_programs(tasks[held], 0, &test, &measured);
    out.push_back(fitted_spearman(train, test, measured, options));
  }
  return out;
}

std::vector<double> intask_spearman(const std::vector<MeasuredPrograms>& tasks,
                                    double train_fraction, const cost::XGBOptions& options) {
  std::vector<double> out;
  for (const MeasuredPrograms& t : tasks) {
    const size_t n_train =
        static_cast<size_t>(train_fraction * static_cast<double>(t.programs.size()));
    cost::TrainingSet train;
    for (size_t p = 0; p < n_train; ++p) train.add(t.task, t.programs[p], t.throughputs[p]);
    std::vector<cost::ProgramFeatures> test;
    std::vector<double> measured;
    valid_programs(t, n_train, &test, &measured);
    out.push_back(fitted_spearman(train, test, measured, options));
  }
  return out;
}

}  // namespace tessera::tune::search
