#include "cost/cost_model.h"

#include <algorithm>
#include <map>

namespace tessera::cost {

std::vector<double> RandomModel::predict(const std::vector<ProgramFeatures>& programs) const {
  std::vector<double> out;
  out.reserve(programs.size());
  for (size_t i = 0; i < programs.size(); ++i) {
    // splitmix64: a tiny generator whose state is one word (predict() is const for callers).
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    out.push_back(static_cast<double>(z >> 11) / static_cast<double>(uint64_t{1} << 53));
  }
  return out;
}

void TrainingSet::add(const std::string& task, ProgramFeatures features, double throughput) {
  programs_.push_back(std::move(features));
  tasks_.push_back(task);
  throughputs_.push_back(std::max(0.0, throughput));
}

size_t TrainingSet::size(const std::string& task) const {
  return static_cast<size_t>(std::count(tasks_.begin(), tasks_.end(), task));
}

std::vector<double> TrainingSet::labels() const {
  std::map<std::string, double> best;
  for (size_t i = 0; i < tasks_.size(); ++i) {
    best[tasks_[i]] = std::max(best[tasks_[i]], throughputs_[i]);
  }
  std::vector<double> out;
  for (size_t i = 0; i < tasks_.size(); ++i) {
    const double b = best[tasks_[i]];
    out.push_back(b > 0 ? throughputs_[i] / b : 0.0);
  }
  return out;
}

std::vector<int> TrainingSet::groups() const {
  std::map<std::string, int> index;
  std::vector<int> out;
  out.reserve(tasks_.size());
  for (const std::string& t : tasks_) {
    out.push_back(index.emplace(t, static_cast<int>(index.size())).first->second);
  }
  return out;
}

}  // namespace tessera::cost
