#pragma once
// The learned cost models' interface (search mode), and the training data they share across
// tasks. A model scores programs given as per-store feature rows (cost/features.h); higher scores
// mean faster programs. Implementations: XGBModel (cost/xgb_model.h), RandomModel (the ablation).
#include <cstdint>
#include <string>
#include <vector>

#include "cost/features.h"

namespace tessera::cost {

class CostModel {
 public:
  virtual ~CostModel() = default;
  virtual std::string name() const = 0;
  // False when the model cannot work here (a library missing): callers rank by other means.
  virtual bool available() const { return true; }
  // Has fit() succeeded at least once?
  virtual bool trained() const = 0;
  // Trains from scratch on `programs` with `labels` (higher = better; one per program). groups[p]:
  // the task of program p (labels compare only within a task where the model ranks); empty: one
  // task.
  virtual void fit(const std::vector<ProgramFeatures>& programs, const std::vector<double>& labels,
                   const std::vector<int>& groups = {}) = 0;
  // One score per program, higher = predicted faster.
  virtual std::vector<double> predict(const std::vector<ProgramFeatures>& programs) const = 0;
};

// Uniform random scores from a seeded generator: the "no model" baseline of the ablations.
class RandomModel : public CostModel {
 public:
  explicit RandomModel(uint64_t seed = 0) : state_(seed) {}
  std::string name() const override { return "random"; }
  bool trained() const override { return true; }
  void fit(const std::vector<ProgramFeatures>&, const std::vector<double>&,
           const std::vector<int>& = {}) override {}
  std::vector<double> predict(const std::vector<ProgramFeatures>& programs) const override;

 private:
  mutable uint64_t state_;
};

// Measured programs of any number of tasks. A label is the program's throughput over the best
// throughput measured for its task (1 = the task's best, 0 = failed), so one model learns across
// tasks of different sizes.
class TrainingSet {
 public:
  // throughput = 1 / time (any unit, the same within a task); 0 for a failed candidate.
  void add(const std::string& task, ProgramFeatures features, double throughput);
  size_t size() const { return programs_.size(); }
  size_t size(const std::string& task) const;
  const std::vector<ProgramFeatures>& programs() const { return programs_; }
  std::vector<double> labels() const;
  // Per program, its task's index in order of first appearance (CostModel::fit's groups).
  std::vector<int> groups() const;

 private:
  std::vector<ProgramFeatures> programs_;
  std::vector<std::string> tasks_;
  std::vector<double> throughputs_;
};

}  // namespace tessera::cost
