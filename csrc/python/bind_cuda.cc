// tessera._C.cuda: the CUDA path for Python, as far as it goes without a device: GPU schedules,
// CUDA C, compiles (NVRTC or nvcc) with ptxas's report, interpreter checks, and what the machine
// has (compiler, devices).
#include <pybind11/stl.h>

#include "cost/gpu_hardware.h"
#include "loop/stmt.h"
#include "python/bindings.h"
#include "runtime/cuda/cuda_compile.h"
#include "runtime/cuda/cuda_module.h"
#include "runtime/cuda/gpu_kernel.h"
#include "runtime/cuda/interpreter_check.h"
#include "schedule/gpu/gpu_program.h"
#include "schedule/gpu/gpu_schedule.h"
#include "schedule/gpu/tiled_reduction.h"
#include "tune/gensor/gpu_construct.h"

namespace py = pybind11;

namespace tessera::python {

namespace {

namespace rc = runtime::cuda;

// The fields of one compiled launch (ptxas's counts where it reported them).
py::dict launch_dict(const std::string& schedule, const rc::CompiledGpuKernel& k) {
  py::dict d;
  d["schedule"] = schedule;
  d["registers"] = k.compiled.ptxas.registers;
  d["spill_bytes"] = k.compiled.ptxas.spill_bytes();
  d["shared_bytes"] = k.compiled.ptxas.shared_bytes;
  d["cubin_bytes"] = k.compiled.cubin.size();
  return d;
}

py::dict compile_kernel(const std::vector<PyTensor>& outputs, const std::vector<PyTensor>& inputs,
                        const std::string& name, const std::string& arch, bool construct,
                        uint64_t seed) {
  const std::vector<ir::Tensor> outs = unwrap(outputs), ins = unwrap(inputs);
  py::dict d;
  rc::CudaCompileOptions options;
  options.arch = arch;
  std::vector<std::pair<std::string, rc::CompiledGpuKernel>> kernels;
  if (construct) {  // construct tunes one tiled launch; other plans take the default program
    const schedule::StagePlan plan =
        schedule::plan_stages(outs, ins, schedule::gpu::gpu_plan_choices());
    if (schedule::gpu::gpu_schedule_name(plan) == "tiled") {
      tune::gensor::GpuConstructOptions o;
      o.seed = seed;
      const tune::gensor::GpuConstructResult r =
          tune::gensor::construct_gpu(plan, cost::h100_sxm(), o);
      kernels.emplace_back(
          "tiled", rc::compile_gpu_kernel(
                       schedule::gpu::lower_tiled_reduction(plan, r.config, name), options));
      d["config"] = r.config.text();
      d["predicted_ms"] = r.prediction.time_s * 1e3;
    }
  }
  if (kernels.empty()) {
    for (const auto& launch : schedule::gpu::lower_gpu_program(outs, ins, name).launches) {
      kernels.emplace_back(launch.schedule, rc::compile_gpu_kernel(launch.func, options));
    }
  }
  // The whole program: its schedules joined, sources concatenated, the worst launch's
  // registers and shared memory, spills and cubins summed; per launch in "launches".
  std::string schedule, source, log;
  int64_t registers = 0, spill_bytes = 0, shared_bytes = 0, cubin_bytes = 0;
  bool from_cache = true, ptxas_found = true;
  py::list launches;
  for (const auto& [name_of_schedule, k] : kernels) {
    schedule += (schedule.empty() ? "" : "+") + name_of_schedule;
    source += k.source;
    log += k.compiled.log;
    registers = std::max<int64_t>(registers, k.compiled.ptxas.registers);
    spill_bytes += k.compiled.ptxas.spill_bytes();
    shared_bytes = std::max<int64_t>(shared_bytes, k.compiled.ptxas.shared_bytes);
    cubin_bytes += static_cast<int64_t>(k.compiled.cubin.size());
    from_cache = from_cache && k.compiled.from_cache;
    ptxas_found = ptxas_found && k.compiled.ptxas.found;
    launches.append(launch_dict(name_of_schedule, k));
  }
  d["schedule"] = schedule;
  d["source"] = source;
  d["compiler"] = rc::cuda_compiler_name(kernels.front().second.compiled.compiler);
  d["cubin_bytes"] = cubin_bytes;
  d["from_cache"] = from_cache;
  d["ptxas_found"] = ptxas_found;
  d["registers"] = registers;
  d["spill_bytes"] = spill_bytes;
  d["shared_bytes"] = shared_bytes;
  d["log"] = log;
  d["launches"] = launches;
  return d;
}

py::dict check_schedule(const std::vector<PyTensor>& outputs, const std::vector<PyTensor>& inputs,
                        const std::string& name, uint64_t seed) {
  const rc::InterpreterCase c = rc::check_gpu_schedule(unwrap(outputs), unwrap(inputs), name, seed);
  py::dict d;
  d["name"] = c.name;
  d["schedule"] = c.schedule;
  d["races"] = c.races;
  d["out_of_bounds"] = c.out_of_bounds;
  d["uninitialized_reads"] = c.uninitialized_reads;
  d["matches"] = c.matches;
  d["passed"] = c.passed();
  d["message"] = c.message;
  return d;
}

}  // namespace

void bind_cuda(py::module_& parent) {
  py::module_ m = parent.def_submodule("cuda", "CUDA path: GPU schedules, compiles, checks");
  m.def(
      "compiler", []() { return rc::cuda_compiler_name(rc::available_cuda_compiler()); },
      "The CUDA compiler compiles use here: 'nvrtc', 'nvcc' or 'none'.");
  m.def("device_count", &rc::cuda_device_count, "CUDA devices the driver sees (0 without one).");
  m.def(
      "device_name", [](int ordinal) { return rc::cuda_device_info(ordinal).name; },
      py::arg("ordinal") = 0);
  m.def("compile_kernel", &compile_kernel, py::arg("outputs"), py::arg("inputs"), py::arg("name"),
        py::arg("arch") = rc::kDefaultCudaArch, py::arg("construct") = false, py::arg("seed") = 0,
        "Lowers the kernel as GPU launches (one per run of stages one GPU schedule covers; "
        "construct: a tiled reduction's configuration from Gensor on GPU with the shipped H100 "
        "description, predict-only), emits CUDA C and compiles it to cubins; a dict with the "
        "schedule ('tiled', 'tiled+row', ...), source, compiler, registers and spill bytes, "
        "per launch in 'launches' (and config, predicted_ms with construct). Raises "
        "TesseraError.");
  m.def("check_schedule", &check_schedule, py::arg("outputs"), py::arg("inputs"), py::arg("name"),
        py::arg("seed") = 1,
        "Runs the kernel's GPU schedule in the GPU-semantics interpreter on random inputs against "
        "the reference; a dict with races, out_of_bounds, matches, passed and a message.");
}

}  // namespace tessera::python
