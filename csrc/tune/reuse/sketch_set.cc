#include "tune/reuse/sketch_set.h"

#include <algorithm>
#include <sstream>
#include <vector>

#include "tune/search/space.h"

namespace tessera::tune::reuse {

namespace {

// Position of `name` among the kernel inputs, else among the temporaries (prefixed), else the
// name itself (a tensor the plan does not list should not happen; the text stays honest).
std::string operand_id(const std::string& name, const schedule::StagePlan& plan) {
  for (size_t i = 0; i < plan.inputs.size(); ++i) {
    if (plan.inputs[i]->name == name) return "in" + std::to_string(i);
  }
  for (size_t i = 0; i < plan.temporaries.size(); ++i) {
    if (plan.temporaries[i]->name == name) return "tmp" + std::to_string(i);
  }
  return "?" + name;
}

std::string stage_text(const search::StageChoices& c, const schedule::Stage& stage,
                       const schedule::StagePlan& plan) {
  const gensor::StageSpace& sp = c.space;
  std::vector<std::string> pack;
  for (const std::string& p : c.packable) pack.push_back(operand_id(p, plan));
  std::sort(pack.begin(), pack.end());
  std::ostringstream os;
  os << "axes=" << sp.num_spatial << "+" << sp.num_reduce
     << " epilogue=" << (stage.epilogue ? 1 : 0)
     << " rules=" << schedule::sketch_name(sp.base.sketch)
     << " cross_lane=" << (c.cross_lane_legal ? 1 : 0) << " vector_axis=" << c.vector_axis
     << " pack=";
  for (const std::string& p : pack) os << p << ",";
  return os.str();
}

}  // namespace

schedule::Target reference_target() { return schedule::Target{}; }

std::string sketch_set_text(const Task& task) {
  const search::SearchSpace space(task);
  std::ostringstream os;
  for (int v = 0; v < space.num_variants(); ++v) {
    const search::PlanVariant& variant = space.variant(v);
    const schedule::StagePlan& plan = task.plan_for(variant.choices);
    os << "[" << variant.choices.text() << "]";
    for (size_t s = 0; s < variant.stages.size(); ++s) {
      os << " {" << stage_text(variant.stages[s], plan.stages[s], plan) << "}";
    }
    os << "\n";
  }
  return os.str();
}

}  // namespace tessera::tune::reuse
