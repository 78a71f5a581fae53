#include "compiler/build.h"

#include <chrono>

#include "schedule/lower.h"
#include "util/check.h"

namespace tessera::compiler {

void BuiltKernel::run(void** buffers, const int64_t* sizes) const {
  kernel_->run_unchecked(buffers, sizes);
}

void BuiltKernel::run(const std::vector<void*>& buffers, const std::vector<int64_t>& sizes) const {
  kernel_->run(buffers, sizes);
}

BuiltKernel build_cpu(const std::vector<ir::Tensor>& outputs, const std::vector<ir::Tensor>& inputs,
                      const BuildOptions& options) {
  auto t0 = std::chrono::steady_clock::now();
  BuiltKernel k;
  k.plan_ = schedule::plan_stages(outputs, inputs);
  schedule::Target target = options.target ? *options.target : schedule::Target::host();
  k.schedule_ = options.schedule ? *options.schedule : schedule::default_schedule(k.plan_, target);
  k.func_ = schedule::lower(k.plan_, k.schedule_, options.name);
  k.lower_ms_ =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  k.kernel_ =
      std::make_shared<const runtime::Kernel>(runtime::Kernel::compile(k.func_, options.codegen));
  return k;
}

}  // namespace tessera::compiler
