#include "compiler/build.h"

#include <algorithm>
#include <chrono>

#include "schedule/lower.h"
#include "schedule/prepack.h"
#include "util/check.h"
#include "util/counters.h"

namespace tessera::compiler {

void BuiltKernel::run(void** buffers, const int64_t* sizes) const {
  kernel_->run_unchecked(buffers, sizes);
}

void BuiltKernel::run(const std::vector<void*>& buffers, const std::vector<int64_t>& sizes) const {
  kernel_->run(buffers, sizes);
}

std::vector<runtime::NDArray> BuiltKernel::pack_prepacked(std::vector<void*>* buffers) const {
  std::vector<runtime::NDArray> packed;
  packed.reserve(prepacks_.size());
  for (const Prepack& p : prepacks_) {
    const size_t i = static_cast<size_t>(p.input);
    packed.emplace_back(plan_.inputs[i]->dtype, p.kernel->arg_shapes({})[1]);
    p.kernel->run({(*buffers)[i], packed.back().data()}, {});
    (*buffers)[i] = packed.back().data();
  }
  return packed;
}

BuiltKernel build_cpu(const schedule::StagePlan& plan, const schedule::KernelSchedule& schedule,
                      const std::string& name, const codegen::CompileOptions& codegen,
                      const std::vector<std::string>& prepacked) {
  const auto t0 = std::chrono::steady_clock::now();
  BuiltKernel k;
  k.plan_ = plan;
  k.schedule_ = schedule;
  util::bump(util::Counter::kLowerings);
  k.func_ = schedule::lower(k.plan_, k.schedule_, name, prepacked);
  std::vector<loop::LoweredFunc> pack_funcs;
  for (size_t i = 0; i < plan.inputs.size(); ++i) {
    const std::string& input = plan.inputs[i]->name;
    if (std::find(prepacked.begin(), prepacked.end(), input) == prepacked.end()) continue;
    util::bump(util::Counter::kLowerings);
    pack_funcs.push_back(schedule::lower_prepack(plan, schedule, input, name + "_pack_" + input));
    k.prepacks_.push_back(Prepack{static_cast<int>(i), nullptr});
  }
  k.lower_ms_ =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  k.kernel_ = std::make_shared<const runtime::Kernel>(runtime::Kernel::compile(k.func_, codegen));
  for (size_t p = 0; p < pack_funcs.size(); ++p) {
    k.prepacks_[p].kernel =
        std::make_shared<const runtime::Kernel>(runtime::Kernel::compile(pack_funcs[p], codegen));
  }
  return k;
}

BuiltKernel build_cpu(const std::vector<ir::Tensor>& outputs, const std::vector<ir::Tensor>& inputs,
                      const BuildOptions& options) {
  const schedule::StagePlan plan = schedule::plan_stages(
      outputs, inputs, options.schedule ? options.schedule->plan : schedule::PlanChoices{});
  const schedule::Target target = options.target ? *options.target : schedule::Target::host();
  const schedule::KernelSchedule schedule =
      options.schedule ? *options.schedule : schedule::default_schedule(plan, target);
  const std::vector<std::string> prepacked =
      options.constant_inputs.empty()
          ? std::vector<std::string>{}
          : schedule::prepackable_inputs(plan, schedule, options.constant_inputs);
  return build_cpu(plan, schedule, options.name, options.codegen, prepacked);
}

}  // namespace tessera::compiler
