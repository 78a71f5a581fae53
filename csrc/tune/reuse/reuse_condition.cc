#include "tune/reuse/reuse_condition.h"

#include <algorithm>

#include "schedule/tuning_policy.h"
#include "tune/reuse/sketch_set.h"
#include "util/check.h"

namespace tessera::tune::reuse {

namespace {

double product(const std::vector<int64_t>& v, size_t begin, size_t end) {
  double p = 1;
  for (size_t i = begin; i < end; ++i) p *= static_cast<double>(v[i]);
  return p;
}

int64_t extent_value(const ir::Expr& e, const Task& task) {
  if (e->is_const_int()) return e->int_value;
  auto it = task.sizes.find(e.get());
  return it != task.sizes.end() ? it->second : kSymbolicSizeGuess;
}

bool same_extents(const ReuseOperator& a, const ReuseOperator& b) { return a.extents == b.extents; }

}  // namespace

int anchor_stage_index(const schedule::StagePlan& plan) {
  TESSERA_CHECK(!plan.stages.empty()) << "reuse: a kernel without stages has no loop nest";
  int best = 0;
  auto reduces = [&](int i) { return !plan.stages[i].op->op->reduce_axes.empty(); };
  auto points = [&](int i) { return schedule::stage_points(plan.stages[i], kSymbolicSizeGuess); };
  for (int i = 1; i < static_cast<int>(plan.stages.size()); ++i) {
    if (reduces(i) != reduces(best) ? reduces(i) : points(i) > points(best)) best = i;
  }
  return best;
}

double ReuseOperator::points() const { return product(extents, 0, extents.size()); }

double ReuseOperator::reduce_points() const {
  return product(extents, static_cast<size_t>(num_spatial), extents.size());
}

ReuseOperator describe_operator(const Task& task) {
  ReuseOperator op;
  op.name = task.name;
  op.type = operator_type(task.outputs);
  Task reference = task;
  reference.target = reference_target();
  op.sketch_set = sketch_set_text(reference);
  const ir::ComputeOpNode& anchor = *task.plan.stages[anchor_stage_index(task.plan)].op->op;
  for (const ir::IterVar& iv : anchor.axes) op.extents.push_back(extent_value(iv.extent, task));
  for (const ir::IterVar& iv : anchor.reduce_axes)
    op.extents.push_back(extent_value(iv.extent, task));
  op.num_spatial = static_cast<int>(anchor.axes.size());
  return op;
}

ReuseOperator describe_operator(const std::vector<ir::Tensor>& outputs,
                                const std::vector<ir::Tensor>& inputs, const std::string& name) {
  return describe_operator(Task::create(outputs, inputs, name));
}

bool same_kind(const ReuseOperator& a, const ReuseOperator& b) {
  return a.extents.size() == b.extents.size() && a.num_spatial == b.num_spatial &&
         a.sketch_set == b.sketch_set && a.type == b.type;
}

bool extents_dominated(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] > b[i]) return false;
  }
  return true;
}

bool can_reuse(const ReuseOperator& a, const ReuseOperator& b) {
  if (!same_kind(a, b)) return false;
  return extents_dominated(a.extents, b.extents) || extents_dominated(b.extents, a.extents);
}

std::vector<std::pair<int, int>> reuse_pairs(const std::vector<ReuseOperator>& ops) {
  std::vector<std::pair<int, int>> pairs;
  const int n = static_cast<int>(ops.size());
  for (int u = 0; u < n; ++u) {
    for (int s = 0; s < n; ++s) {
      if (u != s && can_reuse(ops[u], ops[s])) pairs.emplace_back(u, s);
    }
  }
  return pairs;
}

ReuseOperator bridge_operator(const ReuseOperator& a, const ReuseOperator& b) {
  TESSERA_CHECK(same_kind(a, b)) << "reuse: no bridge between " << a.name << " and " << b.name
                                 << " (different type, sketches or loop count)";
  ReuseOperator g = a;  // type and sketch set are a's (= b's) by Def. 5
  g.name = "bridge(" + a.name + "," + b.name + ")";
  for (size_t i = 0; i < g.extents.size(); ++i) g.extents[i] = std::min(a.extents[i], b.extents[i]);
  return g;
}

std::vector<ReuseOperator> one_hop_bridges(const std::vector<ReuseOperator>& ops) {
  std::vector<ReuseOperator> bridges;
  auto known = [&](const ReuseOperator& g) {
    auto same = [&](const ReuseOperator& o) { return same_extents(o, g) && same_kind(o, g); };
    return std::any_of(ops.begin(), ops.end(), same) ||
           std::any_of(bridges.begin(), bridges.end(), same);
  };
  for (size_t i = 0; i < ops.size(); ++i) {
    for (size_t j = i + 1; j < ops.size(); ++j) {
      if (!same_kind(ops[i], ops[j]) || can_reuse(ops[i], ops[j])) continue;
      ReuseOperator g = bridge_operator(ops[i], ops[j]);
      g.joins = {static_cast<int>(i), static_cast<int>(j)};
      if (!known(g)) bridges.push_back(std::move(g));
    }
  }
  return bridges;
}

}  // namespace tessera::tune::reuse
