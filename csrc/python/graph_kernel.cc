#include "python/graph_kernel.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/DispatchKey.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <utility>

#include "util/check.h"

namespace tessera::python {

namespace {

// The boxed functor the dispatcher owns; it shares the kernel with graph_op.py's GraphOp.
class BoxedGraphKernel final : public c10::OperatorKernel {
 public:
  explicit BoxedGraphKernel(std::shared_ptr<GraphKernel> kernel) : kernel_(std::move(kernel)) {}
  void operator()(const c10::OperatorHandle&, c10::DispatchKeySet, torch::jit::Stack* stack) {
    kernel_->call(stack);
  }

 private:
  std::shared_ptr<GraphKernel> kernel_;
};

bool same_scalar(const c10::IValue& want, const c10::IValue& got) {
  if (want.isBool() || got.isBool())
    return want.isBool() && got.isBool() && want.toBool() == got.toBool();
  if (want.isInt() || got.isInt())
    return want.isInt() && got.isInt() && want.toInt() == got.toInt();
  if (want.isDouble() && got.isDouble()) {
    // Bitwise: a graph specialised on NaN or -0.0 is specialised on exactly that value.
    const double a = want.toDouble(), b = got.toDouble();
    return std::memcmp(&a, &b, sizeof(double)) == 0;
  }
  return want.isNone() && got.isNone();
}

}  // namespace

bool ArgumentSignature::matches(const c10::IValue& v) const {
  if (!is_tensor) return same_scalar(scalar, v);
  if (!v.isTensor()) return false;
  const at::Tensor& t = v.toTensor();
  return t.scalar_type() == dtype && t.sizes().equals(sizes) && t.strides().equals(strides);
}

GraphKernel::GraphKernel(size_t num_arguments, size_t num_returns, Fallback fallback)
    : num_arguments_(num_arguments), num_returns_(num_returns), fallback_(std::move(fallback)) {
  TESSERA_CHECK(fallback_ != nullptr) << "a graph kernel needs a fallback";
}

void GraphKernel::add(GraphPlan plan) {
  TESSERA_CHECK(plan.sequence != nullptr) << "a graph plan needs its sequence";
  TESSERA_CHECK(plan.signature.size() == num_arguments_)
      << "a graph plan's signature has " << plan.signature.size() << " arguments, the operator "
      << num_arguments_;
  TESSERA_CHECK(plan.outputs.size() == num_returns_ && plan.clone.size() == num_returns_)
      << "a graph plan gives " << plan.outputs.size() << " returns, the operator has "
      << num_returns_;
  for (int a : plan.inputs) {
    TESSERA_CHECK(a >= 0 && static_cast<size_t>(a) < num_arguments_)
        << "a graph plan reads argument " << a << " of " << num_arguments_;
  }
  for (const PackedArgument& p : plan.packed) {
    TESSERA_CHECK(p.argument >= 0 && static_cast<size_t>(p.argument) < num_arguments_ &&
                  p.weight != nullptr && plan.signature[p.argument].is_tensor)
        << "a graph plan's packed weight is argument " << p.argument << ", not a tensor one";
  }
  auto shared = std::make_shared<const GraphPlan>(std::move(plan));
  std::lock_guard<std::mutex> lock(mutex_);
  auto same = std::find_if(plans_.begin(), plans_.end(), [&](const auto& p) {
    if (p->signature.size() != shared->signature.size()) return false;
    for (size_t i = 0; i < p->signature.size(); ++i) {
      const ArgumentSignature &a = p->signature[i], &b = shared->signature[i];
      if (a.is_tensor != b.is_tensor || a.dtype != b.dtype || a.sizes != b.sizes ||
          a.strides != b.strides || (!a.is_tensor && !same_scalar(a.scalar, b.scalar))) {
        return false;
      }
    }
    return true;
  });
  if (same != plans_.end()) plans_.erase(same);
  if (plans_.size() == kMaxPlans) plans_.erase(plans_.begin());
  plans_.push_back(std::move(shared));
}

size_t GraphKernel::num_plans() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return plans_.size();
}

std::shared_ptr<const GraphPlan> GraphKernel::find(const c10::IValue* args) const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = plans_.rbegin(); it != plans_.rend(); ++it) {  // newest first
    const std::vector<ArgumentSignature>& sig = (*it)->signature;
    bool match = true;
    for (size_t i = 0; i < sig.size() && match; ++i) match = sig[i].matches(args[i]);
    if (match) return *it;
  }
  return nullptr;
}

void GraphKernel::call(torch::jit::Stack* stack) {
  TESSERA_CHECK(stack->size() >= num_arguments_) << "graph kernel: too few arguments";
  const size_t base = stack->size() - num_arguments_;
  std::shared_ptr<const GraphPlan> plan = find(stack->data() + base);
  std::vector<c10::IValue> values;
  if (plan != nullptr) {
    values.reserve(plan->inputs.size() + plan->packed.size());
    for (int a : plan->inputs) values.push_back((*stack)[base + a]);
    for (const PackedArgument& p : plan->packed) {
      const std::optional<void*> ptr = p.weight->current((*stack)[base + p.argument].toTensor());
      if (!ptr) {  // the weight changed: Python packs it again
        plan = nullptr;
        break;
      }
      values.emplace_back(static_cast<int64_t>(reinterpret_cast<uintptr_t>(*ptr)));
    }
  }
  if (plan == nullptr) {
    ++fallback_calls_;
    fallback_(stack);
    return;
  }
  ++plan_calls_;
  torch::jit::drop(*stack, num_arguments_);  // the arguments die with the sequence's slots
  std::vector<c10::IValue> outs = plan->sequence->run(std::move(values));
  for (size_t r = 0; r < num_returns_; ++r) {
    const c10::IValue& v = outs.at(plan->outputs[r]);
    stack->push_back(plan->clone[r] ? c10::IValue(v.toTensor().clone()) : v);
  }
}

std::unique_ptr<torch::Library> GraphKernel::register_cpu_kernel(
    const std::string& qualified_name, std::shared_ptr<GraphKernel> kernel) {
  const size_t sep = qualified_name.find("::");
  TESSERA_CHECK(sep != std::string::npos)
      << "operator name " << qualified_name << " has no namespace";
  auto lib = std::make_unique<torch::Library>(torch::Library::IMPL, qualified_name.substr(0, sep),
                                              c10::DispatchKey::CPU, __FILE__, __LINE__);
  const std::string name = qualified_name.substr(sep + 2);
  lib->impl(name.c_str(), torch::CppFunction::makeFromBoxedFunctor(
                              std::make_unique<BoxedGraphKernel>(std::move(kernel))));
  return lib;
}

}  // namespace tessera::python
