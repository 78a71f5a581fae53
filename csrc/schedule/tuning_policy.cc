#include "schedule/tuning_policy.h"

#include <limits>

namespace tessera::schedule {

namespace {

TuningPolicy& policy_instance() {
  static TuningPolicy policy;
  return policy;
}

double extent_or(const ir::Expr& e, int64_t symbolic_guess) {
  return e->is_const_int() ? static_cast<double>(e->int_value)
                           : static_cast<double>(symbolic_guess);
}

}  // namespace

const TuningPolicy& tuning_policy() { return policy_instance(); }
TuningPolicy& mutable_tuning_policy() { return policy_instance(); }

double reduce_points(const StagePlan& plan, int64_t symbolic_guess) {
  double total = 0;
  for (const Stage& s : plan.stages) {
    if (s.op->op->reduce_axes.empty()) continue;
    double p = 1;
    for (const auto* axes : {&s.op->op->axes, &s.op->op->reduce_axes}) {
      for (const ir::IterVar& iv : *axes) p *= extent_or(iv.extent, symbolic_guess);
    }
    total += p;
  }
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
