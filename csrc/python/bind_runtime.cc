// Machine facts and runtime knobs: thread pool size, peak probe, hardware description.
#include <pybind11/stl.h>

#include "codegen/llvm/compile.h"
#include "cost/hardware.h"
#include "cost/peak_probe.h"
#include "python/bindings.h"
#include "runtime/parallel.h"

namespace py = pybind11;

namespace tessera::python {

void bind_runtime(py::module_& m) {
  m.def("set_num_threads", &runtime::set_num_threads, py::arg("n"),
        "Pins the threads of Tessera's parallel loops; n <= 0 follows torch's OpenMP team "
        "(torch.set_num_threads) when it runs them, else all CPUs.");
  m.def("get_num_threads", &runtime::get_num_threads);
  m.def(
      "peak_info",
      [](bool refresh) {
        cost::PeakInfo p = cost::get_peak_info(refresh);
        return cost::peak_to_json(p).dump();
      },
      py::arg("refresh") = false,
      "Measured fp32 FMA peak and memory bandwidth (JSON; cached on disk).");
  m.def("hardware", []() { return cost::hardware_to_json(cost::host_hardware(false)).dump(); });
  m.def("host_cpu", []() {
    const codegen::HostCpu& c = codegen::host_cpu();
    py::dict d;
    d["name"] = c.name;
    d["vector_bits"] = c.vector_bits;
    d["has_avx512"] = c.has_avx512;
    return d;
  });
}

}  // namespace tessera::python
