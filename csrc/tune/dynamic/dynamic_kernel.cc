#include "tune/dynamic/dynamic_kernel.h"

#include <algorithm>
#include <string>

#include "runtime/parallel.h"
#include "tune/common.h"
#include "util/check.h"

namespace tessera::tune::dynamic {

using util::Json;

Json DynamicSelection::to_json() const {
  Json j = Json::object();
  Json scheds = Json::array();
  for (const schedule::KernelSchedule& s : schedules) scheds.push_back(s.to_json());
  j["schedules"] = scheds;
  j["dispatcher"] = dispatcher.to_json();
  j["candidates"] = Json(candidates);
  j["pruned"] = Json(pruned);
  j["top_k"] = Json(top_k);
  j["wave_k"] = Json(wave_k);
  j["predicted_loss"] = Json(predicted_loss);
  j["worst_point_loss"] = Json(worst_point_loss);
  return j;
}

DynamicSelection DynamicSelection::from_json(const Json& j) {
  DynamicSelection s;
  try {
    for (const Json& k : j.at("schedules").as_array()) {
      s.schedules.push_back(schedule::KernelSchedule::from_json(k));
    }
    s.dispatcher = Dispatcher::from_json(j.at("dispatcher"));
    s.candidates = static_cast<int>(j.get_int("candidates", 0));
    s.pruned = static_cast<int>(j.get_int("pruned", 0));
    s.top_k = static_cast<int>(j.get_int("top_k", 1));
    s.wave_k = j.get_double("wave_k", 1.0);
    s.predicted_loss = j.get_double("predicted_loss", 0.0);
    s.worst_point_loss = j.get_double("worst_point_loss", 0.0);
  } catch (const util::JsonError& e) {
    TESSERA_CHECK(false) << "dynamic selection: malformed JSON: " << e.what();
  }
  TESSERA_CHECK(!s.schedules.empty()) << "dynamic selection without schedules";
  return s;
}

namespace {

// Invariant the fast path relies on: a kernel's run-time sizes are the workload's size variables
// in the workload's order (lowering takes them from the same DAG in first-use order). `same`
// compares one variable of the kernel with the workload's.
template <typename Same>
void check_size_order(const compiler::BuiltKernel& k, const std::vector<ir::Var>& vars,
                      const Same& same) {
  const std::vector<ir::Var>& kv = k.func().size_vars;
  bool ok = kv.size() == vars.size();
  for (size_t i = 0; ok && i < kv.size(); ++i) ok = same(kv[i], vars[i]);
  TESSERA_CHECK(ok) << "kernel " << k.func().name
                    << ": its size arguments are not the workload's size variables in order";
}

}  // namespace

std::shared_ptr<const compiler::BuiltKernel> DynamicKernel::build_micro_kernel(
    const DynamicWorkload& workload, const schedule::KernelSchedule& schedule,
    const std::string& name) {
  compiler::BuildOptions opts;
  opts.name = name;
  opts.schedule = schedule;
  opts.constant_inputs = workload.constant_input_names();
  return std::make_shared<const compiler::BuiltKernel>(
      compiler::build_cpu(workload.outputs(), workload.inputs(), opts));
}

std::shared_ptr<const compiler::BuiltKernel> DynamicKernel::build_fallback(
    const DynamicWorkload& workload) {
  const DagCopy wide = workload.widened();
  compiler::BuildOptions opts;
  opts.name = workload.name() + "_fallback";
  opts.constant_inputs = workload.constant_input_names();  // the widened inputs keep their names
  return std::make_shared<const compiler::BuiltKernel>(
      compiler::build_cpu(wide.outputs, wide.inputs, opts));
}

std::shared_ptr<const DynamicKernel> DynamicKernel::build(const DynamicWorkload& workload,
                                                          const DynamicSelection& selection) {
  const size_t n = selection.schedules.size();
  std::vector<std::shared_ptr<const compiler::BuiltKernel>> kernels(n);
  std::shared_ptr<const compiler::BuiltKernel> fallback;
  std::vector<std::string> errors(n + 1);
  // Job n is the fallback. Builds are independent; an error is rethrown after all joined.
  run_jobs(n + 1, static_cast<size_t>(std::max(1, runtime::get_num_threads())), [&](size_t i) {
    try {
      if (i == n) {
        fallback = build_fallback(workload);
        return;
      }
      kernels[i] = build_micro_kernel(workload, selection.schedules[i],
                                      workload.name() + "_mk" + std::to_string(i));
    } catch (const std::exception& e) {
      errors[i] = e.what();
    }
  });
  for (const std::string& e : errors) TESSERA_CHECK(e.empty()) << e;
  return assemble(workload, selection, std::move(kernels), std::move(fallback));
}

std::shared_ptr<const DynamicKernel> DynamicKernel::assemble(
    const DynamicWorkload& workload, const DynamicSelection& selection,
    std::vector<std::shared_ptr<const compiler::BuiltKernel>> kernels,
    std::shared_ptr<const compiler::BuiltKernel> fallback) {
  TESSERA_CHECK(!selection.schedules.empty() && kernels.size() == selection.schedules.size())
      << "dynamic kernel: " << kernels.size() << " kernels for " << selection.schedules.size()
      << " schedules";
  TESSERA_CHECK(selection.dispatcher.axes() == workload.num_axes())
      << "dispatcher for " << selection.dispatcher.axes() << " axes, workload has "
      << workload.num_axes();
  TESSERA_CHECK(selection.dispatcher.max_label() < static_cast<int>(kernels.size()))
      << "dispatcher names kernel " << selection.dispatcher.max_label() << " of " << kernels.size();
  auto dk = std::make_shared<DynamicKernel>();
  dk->selection_ = selection;
  dk->num_sizes_ = workload.num_axes();
  dk->num_buffers_ = workload.inputs().size() + workload.outputs().size();
  for (const auto& k : kernels) {
    TESSERA_CHECK(k != nullptr) << "dynamic kernel: missing kernel";
    check_size_order(*k, workload.size_vars(),
                     [](const ir::Var& a, const ir::Var& b) { return a.same_as(b); });
  }
  dk->kernels_ = std::move(kernels);
  TESSERA_CHECK(fallback != nullptr) << "dynamic kernel: missing fallback";
  dk->fallback_ = std::move(fallback);
  // The widened variables are new nodes with the old names, in the old order.
  check_size_order(*dk->fallback_, workload.size_vars(),
                   [](const ir::Var& a, const ir::Var& b) { return a->name == b->name; });
  std::vector<const compiler::BuiltKernel*> all;
  for (const auto& k : dk->kernels_) all.push_back(k.get());
  all.push_back(dk->fallback_.get());
  dk->packed_ = PackedConstants::plan(all, workload.constant_inputs());
  return dk;
}

void DynamicKernel::run(const std::vector<void*>& buffers, const SizePoint& sizes) const {
  TESSERA_CHECK(buffers.size() == num_buffers_)
      << "dynamic kernel takes " << num_buffers_ << " buffers, got " << buffers.size();
  TESSERA_CHECK(sizes.size() == num_sizes_)
      << "dynamic kernel takes " << num_sizes_ << " sizes, got " << sizes.size();
  for (int64_t s : sizes) TESSERA_CHECK(s >= 0) << "sizes must be >= 0, got " << s;
  const size_t index = dispatched(sizes.data());
  std::vector<void*> pointed = buffers;
  packed_.point(index, pointed.data());
  numbered(index).run(pointed, sizes);
}

void DynamicKernel::run(void** buffers, const int64_t* sizes) const {
  const size_t index = dispatched(sizes);
  const compiler::BuiltKernel& chosen = numbered(index);
  if (packed_.empty()) {
    chosen.run(buffers, sizes);
    return;
  }
  // Each packed argument moved to the dispatched kernel's segment, on a copy of the pointers.
  constexpr size_t kInlineBuffers = 16;
  void* inline_copy[kInlineBuffers];
  std::vector<void*> heap_copy;
  void** pointed = inline_copy;
  if (num_buffers_ > kInlineBuffers) {
    heap_copy.resize(num_buffers_);
    pointed = heap_copy.data();
  }
  std::copy(buffers, buffers + num_buffers_, pointed);
  packed_.point(index, pointed);
  chosen.run(pointed, sizes);
}

}  // namespace tessera::tune::dynamic
