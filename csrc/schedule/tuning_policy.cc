#include "schedule/tuning_policy.h"

#include <limits>

namespace tessera::schedule {

namespace {

double extent_or(const ir::Expr& e, int64_t symbolic_guess) {
  return e->is_const_int() ? static_cast<double>(e->int_value)
                           : static_cast<double>(symbolic_guess);
}

}  // namespace

const TuningPolicy& tuning_policy() {
  static const TuningPolicy policy;
  return policy;
}

double stage_points(const Stage& stage, int64_t symbolic_guess) {
  double p = 1;
  for (const auto* axes : {&stage.op->op->axes, &stage.op->op->reduce_axes}) {
    for (const ir::IterVar& iv : *axes) p *= extent_or(iv.extent, symbolic_guess);
  }
  return p;
}

double reduce_points(const StagePlan& plan, int64_t symbolic_guess) {
  double total = 0;
  for (const Stage& s : plan.stages) {
    if (!s.op->op->reduce_axes.empty()) total += stage_points(s, symbolic_guess);
  }
  return total;
}

double total_points(const StagePlan& plan, int64_t symbolic_guess) {
  double total = 0;
  for (const Stage& s : plan.stages) total += stage_points(s, symbolic_guess);
  return total;
}

int64_t boundary_bytes(const StagePlan& plan, int64_t symbolic_guess) {
  double total = 0;
  for (const auto* tensors : {&plan.inputs, &plan.outputs}) {
    for (const ir::Tensor& t : *tensors) {
      double n = ir::dtype_bytes(t->dtype);
      for (const ir::Expr& d : t->shape) n *= extent_or(d, symbolic_guess);
      total += n;
    }
  }
  const double cap = static_cast<double>(std::numeric_limits<int64_t>::max() / 2);
  return static_cast<int64_t>(total < cap ? total : cap);
}

}  // namespace tessera::schedule
