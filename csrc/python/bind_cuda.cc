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
#include "schedule/gpu/gpu_schedule.h"
#include "schedule/gpu/tiled_reduction.h"
#include "tune/gensor/gpu_construct.h"

namespace py = pybind11;

namespace tessera::python {

namespace {

namespace rc = runtime::cuda;

py::dict compile_kernel(const std::vector<PyTensor>& outputs, const std::vector<PyTensor>& inputs,
                        const std::string& name, const std::string& arch, bool construct,
                        uint64_t seed) {
  const std::vector<ir::Tensor> outs = unwrap(outputs), ins = unwrap(inputs);
  const schedule::StagePlan plan =
      schedule::plan_stages(outs, ins, schedule::gpu::gpu_plan_choices());
  py::dict d;
  loop::LoweredFunc f;
  if (construct && schedule::gpu::gpu_schedule_name(plan) == "tiled") {
    tune::gensor::GpuConstructOptions o;
    o.seed = seed;
    const tune::gensor::GpuConstructResult r =
        tune::gensor::construct_gpu(plan, cost::h100_sxm(), o);
    f = schedule::gpu::lower_tiled_reduction(plan, r.config, name);
    d["config"] = r.config.text();
    d["predicted_ms"] = r.prediction.time_s * 1e3;
  } else {
    f = schedule::gpu::lower_gpu(plan, name);
  }
  rc::CudaCompileOptions options;
  options.arch = arch;
  const rc::CompiledGpuKernel k = rc::compile_gpu_kernel(f, options);
  d["schedule"] = schedule::gpu::gpu_schedule_name(plan);
  d["source"] = k.source;
  d["compiler"] = rc::cuda_compiler_name(k.compiled.compiler);
  d["cubin_bytes"] = k.compiled.cubin.size();
  d["from_cache"] = k.compiled.from_cache;
  d["ptxas_found"] = k.compiled.ptxas.found;
  d["registers"] = k.compiled.ptxas.registers;
  d["spill_bytes"] = k.compiled.ptxas.spill_bytes();
  d["shared_bytes"] = k.compiled.ptxas.shared_bytes;
  d["log"] = k.compiled.log;
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
        "Lowers the kernel with its GPU schedule (construct: a tiled reduction's configuration "
        "from Gensor on GPU with the shipped H100 description, predict-only), emits CUDA C and "
        "compiles it to a cubin; a dict with the schedule, source, compiler, registers and spill "
        "bytes (and config, predicted_ms with construct). Raises TesseraError.");
  m.def("check_schedule", &check_schedule, py::arg("outputs"), py::arg("inputs"), py::arg("name"),
        py::arg("seed") = 1,
        "Runs the kernel's GPU schedule in the GPU-semantics interpreter on random inputs against "
        "the reference; a dict with races, out_of_bounds, matches, passed and a message.");
}

}  // namespace tessera::python
