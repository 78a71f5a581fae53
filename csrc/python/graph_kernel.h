#pragma once
// The CPU kernel of a compiled graph's custom operator (torch.ops.tessera.graph_<n>_<kind>,
// graph_op.py), registered from C++ through torch::Library (issue 19, item 7): a call whose
// inputs match a plan's signature runs that plan's AtenSequence (the whole graph's runner: ATen
// operators and Tessera programs) without Python; any other call goes to the fallback, which
// plans the new signature in Python and may add a plan for it.
//
// Invariants:
//  - a plan is used only for inputs with exactly its signature (per argument: dtype, sizes and
//    strides of a tensor, or the value of a scalar), because the sequence's kernels and
//    constants were specialised on it, and only while its packed weights are current;
//  - the kernel returns what the operator's schema declares: one tensor per return, those that
//    would alias an input or another return cloned (graph_op.GraphOp.clone);
//  - the registration lives as long as the GraphKernel object: destroying it deregisters the
//    CPU kernel (the operator's definition is owned by graph_op.py's torch.library.Library).
#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <ATen/core/stack.h>
#include <torch/library.h>

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "python/aten_sequence.h"
#include "python/packed_weight.h"

namespace tessera::python {

// What one operator argument must be for a plan to apply.
struct ArgumentSignature {
  bool is_tensor = false;
  c10::ScalarType dtype = c10::ScalarType::Undefined;  // tensors
  std::vector<int64_t> sizes, strides;                 // tensors
  c10::IValue scalar;                                  // scalars: the exact value

  bool matches(const c10::IValue& v) const;
};

// A weight argument the sequence reads through its packed copy (passed as a pointer).
struct PackedArgument {
  int argument = -1;
  std::shared_ptr<const PackedWeight> weight;
};

struct GraphPlan {
  std::vector<ArgumentSignature> signature;  // one per operator argument
  std::shared_ptr<const AtenSequence> sequence;
  // The sequence's inputs: the operator arguments `inputs` names, then the packed copies'
  // pointers of `packed`, in order. A call whose weight has changed since its copy was made
  // goes to the fallback, which packs it again.
  std::vector<int> inputs;  // per sequence input: the operator argument it is
  std::vector<PackedArgument> packed;
  std::vector<int> outputs;  // per operator return: the sequence output it is
  std::vector<bool> clone;   // per operator return: copy it (it would alias)
};

class GraphKernel {
 public:
  // Called with the operator's arguments on the stack where no plan matches; leaves the
  // operator's returns there.
  using Fallback = std::function<void(torch::jit::Stack*)>;

  GraphKernel(size_t num_arguments, size_t num_returns, Fallback fallback);

  // Adds a plan (replacing one with an equal signature); at most kMaxPlans are kept, the
  // oldest dropped first.
  void add(GraphPlan plan);
  size_t num_plans() const;
  // Calls that ran a plan, and calls handed to the fallback (for tests and explain).
  size_t plan_calls() const { return plan_calls_; }
  size_t fallback_calls() const { return fallback_calls_; }

  // The boxed kernel: pops the arguments, pushes the returns.
  void call(torch::jit::Stack* stack);

  // Registers call() as the CPU kernel of the operator `qualified_name` ("ns::name"), whose
  // schema must already be defined; the registration ends with the returned object.
  static std::unique_ptr<torch::Library> register_cpu_kernel(const std::string& qualified_name,
                                                             std::shared_ptr<GraphKernel> kernel);

  // Plans one graph keeps: as many as graph.py keeps runners (jit_cache.SHAPES_PER_GRAPH).
  static constexpr size_t kMaxPlans = 64;

 private:
  // The newest plan whose signature the num_arguments_ values at args match, or null.
  std::shared_ptr<const GraphPlan> find(const c10::IValue* args) const;

  size_t num_arguments_, num_returns_;
  Fallback fallback_;
  mutable std::mutex mutex_;  // guards plans_ (added from Python, read by calls)
  std::vector<std::shared_ptr<const GraphPlan>> plans_;
  std::atomic<size_t> plan_calls_{0}, fallback_calls_{0};
};

}  // namespace tessera::python
