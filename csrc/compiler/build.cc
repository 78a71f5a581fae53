#include "compiler/build.h"

#include <chrono>

#include "ir/eval.h"
#include "schedule/lower.h"
#include "util/check.h"

namespace tessera::compiler {

void BuiltKernel::run(void** buffers, const int64_t* sizes) const { (*compiled_)(buffers, sizes); }

void BuiltKernel::run(const std::vector<void*>& buffers, const std::vector<int64_t>& sizes) const {
  TESSERA_CHECK(buffers.size() == func_.args.size())
      << "kernel " << func_.name << " takes " << func_.args.size() << " buffers, got "
      << buffers.size();
  TESSERA_CHECK(sizes.size() == func_.size_vars.size())
      << "kernel " << func_.name << " takes " << func_.size_vars.size() << " sizes, got "
      << sizes.size();
  for (size_t i = 0; i < buffers.size(); ++i) {
    TESSERA_CHECK(buffers[i] != nullptr || arg_numel(i, sizes) == 0)
        << "buffer " << func_.args[i]->name << " is null";
  }
  (*compiled_)(const_cast<void**>(buffers.data()), sizes.data());
}

int64_t BuiltKernel::arg_numel(size_t i, const std::vector<int64_t>& sizes) const {
  TESSERA_CHECK(i < func_.args.size()) << "no argument " << i;
  ir::EvalEnv env;
  for (size_t k = 0; k < func_.size_vars.size() && k < sizes.size(); ++k) {
    env.vars[func_.size_vars[k].get()] = ir::Scalar::of_int(sizes[k]);
  }
  return ir::evaluate(ir::buffer_size(func_.args[i]), env).i;
}

BuiltKernel build_cpu(const std::vector<ir::Tensor>& outputs, const std::vector<ir::Tensor>& inputs,
                      const BuildOptions& options) {
  auto t0 = std::chrono::steady_clock::now();
  BuiltKernel k;
  k.plan_ = schedule::plan_stages(outputs, inputs);
  schedule::Target target = options.target ? *options.target : schedule::Target::host();
  k.schedule_ = options.schedule ? *options.schedule : schedule::default_schedule(k.plan_, target);
  k.func_ = schedule::lower(k.plan_, k.schedule_, options.name);
  k.lower_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  k.compiled_ = codegen::compile_cpu(k.func_, options.codegen);
  return k;
}

}  // namespace tessera::compiler
