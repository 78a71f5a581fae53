#pragma once
// How well the learned cost model ranks programs of tasks it was never trained on: for each
// task, an XGBoost model (the pack-sum model search mode uses) is fitted on the measured programs
// of every other task, and its scores for this task's programs are compared with their measured
// throughput by Spearman's rank correlation. This is what matters when search mode meets a new
// kernel with a model trained on earlier ones.
#include <string>
#include <vector>

#include "cost/features.h"
#include "cost/xgb_model.h"

namespace tessera::tune::search {

struct MeasuredPrograms {
  std::string task;
  std::vector<cost::ProgramFeatures> programs;
  std::vector<double> throughputs;  // 1 / time per program; 0 = failed
};

// Spearman's rho of two equally long series (ties get their average rank); 0 when either is
// constant or shorter than 2.
double spearman(const std::vector<double>& a, const std::vector<double>& b);

// Per task, in order: rho between the held-out model's scores and the measured throughputs of
// the task's valid programs (NaN when the task has fewer than 2 valid programs, or the other
// tasks have none to train on).
std::vector<double> heldout_spearman(const std::vector<MeasuredPrograms>& tasks,
                                     const cost::XGBOptions& options = {});

// Per task, in order: rho on the task's own later programs of a model fitted on its first
// `train_fraction` (in measurement order, as search mode trains on earlier rounds to rank the
// next), against the measured throughputs of the valid ones among the rest (NaN when fewer than 2
// are valid or none were trained on). The in-task counterpart of heldout_spearman.
std::vector<double> intask_spearman(const std::vector<MeasuredPrograms>& tasks,
                                    double train_fraction = 0.5,
                                    const cost::XGBOptions& options = {});

}  // namespace tessera::tune::search
