#include "runtime/kernel.h"

#include <limits>

#include "ir/eval.h"
#include "util/check.h"

namespace tessera::runtime {

Kernel::Kernel(std::shared_ptr<const codegen::CompiledKernel> compiled)
    : compiled_(std::move(compiled)) {
  TESSERA_CHECK(compiled_ != nullptr) << "Kernel needs a compiled kernel";
  const loop::LoweredFunc& f = compiled_->func();
  has_status_ = f.has_status;
  const size_t visible = f.args.size() - (has_status_ ? 1 : 0);
  for (size_t i = 0; i < visible; ++i) {
    const ir::Buffer& b = f.args[i];
    args_.push_back(KernelArg{b->name, b->dtype, b->shape});
  }
}

void Kernel::run_unchecked(void** buffers, const int64_t* sizes) const {
  if (!has_status_) {
    (*compiled_)(buffers, sizes);
    return;
  }
  std::vector<void*> with_status(buffers, buffers + args_.size());
  int32_t status = 0;
  with_status.push_back(&status);
  (*compiled_)(with_status.data(), sizes);
  // A user's data error, not a failed internal check: the message is the user's.
  if (status != 0) throw Error("ZeroDivisionError: integer division by zero in kernel " + name());
}

Kernel Kernel::compile(const loop::LoweredFunc& f, const codegen::CompileOptions& options) {
  return Kernel(codegen::compile_cpu(f, options));
}

void Kernel::check_sizes(const std::vector<int64_t>& sizes) const {
  const std::vector<ir::Var>& vars = size_vars();
  TESSERA_CHECK(sizes.size() == vars.size())
      << "kernel " << name() << " takes " << vars.size() << " size value(s), got " << sizes.size();
  for (size_t i = 0; i < vars.size(); ++i) {
    const ir::Var& v = vars[i];
    TESSERA_CHECK(sizes[i] >= v->lo && sizes[i] <= v->hi)
        << "kernel " << name() << ": size " << v->name << " = " << sizes[i]
        << " is outside its declared range [" << v->lo << ", " << v->hi << "]";
  }
}

std::vector<std::vector<int64_t>> Kernel::arg_shapes(const std::vector<int64_t>& sizes) const {
  check_sizes(sizes);
  ir::EvalEnv env;
  const std::vector<ir::Var>& vars = size_vars();
  for (size_t i = 0; i < vars.size(); ++i) env.vars[vars[i].get()] = ir::Scalar::of_int(sizes[i]);
  std::vector<std::vector<int64_t>> shapes;
  for (const KernelArg& a : args_) {
    std::vector<int64_t> shape;
    for (const ir::Expr& d : a.shape) {
      ir::Scalar s = ir::evaluate(d, env);
      TESSERA_CHECK(s.is_int) << "shape of " << a.name << " is not an integer expression";
      TESSERA_CHECK(s.i >= 0) << "argument " << a.name << " of kernel " << name()
                              << " gets a negative dimension (" << s.i << ") for these sizes";
      shape.push_back(s.i);
    }
    shapes.push_back(std::move(shape));
  }
  return shapes;
}

std::vector<int64_t> Kernel::arg_numels(const std::vector<int64_t>& sizes) const {
  std::vector<int64_t> out;
  for (const std::vector<int64_t>& shape : arg_shapes(sizes)) {
    int64_t n = 1;
    for (int64_t d : shape) {
      TESSERA_CHECK(d == 0 || n <= std::numeric_limits<int64_t>::max() / d)
          << "kernel " << name() << ": an argument's element count overflows int64 for these sizes";
      n *= d;
    }
    out.push_back(n);
  }
  return out;
}

void Kernel::run(const std::vector<void*>& buffers, const std::vector<int64_t>& sizes) const {
  TESSERA_CHECK(buffers.size() == args_.size())
      << "kernel " << name() << " takes " << args_.size() << " buffer(s), got " << buffers.size();
  check_sizes(sizes);
  bool any_null = false;
  for (void* p : buffers) any_null |= p == nullptr;
  if (any_null) {
    // Null is fine only for an empty buffer, which the kernel never dereferences.
    std::vector<int64_t> numels = arg_numels(sizes);
    for (size_t i = 0; i < buffers.size(); ++i) {
      TESSERA_CHECK(buffers[i] != nullptr || numels[i] == 0)
          << "kernel " << name() << ": buffer " << args_[i].name << " is null";
    }
  }
  run_unchecked(const_cast<void**>(buffers.data()), sizes.data());
}

}  // namespace tessera::runtime
