// The Python extension module tessera._C: the only translation units that see pybind11 (and,
// later, torch headers) live in csrc/python/, so the core stays free of Python.
#include <string>

#include "python/bindings.h"
#include "util/check.h"

#ifndef TESSERA_VERSION
#define TESSERA_VERSION "0.0.0"  // CMake passes the project version; this keeps editors happy.
#endif

namespace py = pybind11;

PYBIND11_MODULE(_C, m) {
  m.doc() = "Tessera C++ core (compiled module)";
  m.def(
      "version", []() { return std::string(TESSERA_VERSION); },
      "Version of the compiled Tessera core.");
  py::register_exception<tessera::Error>(m, "TesseraError", PyExc_RuntimeError);
  tessera::python::bind_ir(m);
  tessera::python::bind_compile(m);
  py::module_ ops = m.def_submodule("ops", "Operator library (tensor-expression definitions)");
  tessera::python::bind_ops(ops);
  tessera::python::bind_kernel_call(m);
  tessera::python::bind_kernel(m);
  tessera::python::bind_cuda(m);
  tessera::python::bind_runtime(m);
  tessera::python::bind_host_threads(m);
  tessera::python::bind_frontend(m);
  tessera::python::bind_db(m);
  tessera::python::bind_tune(m);
  tessera::python::bind_search(m);
  tessera::python::bind_runner(m);
  tessera::python::bind_reuse(m);
  tessera::python::bind_derive(m);
  tessera::python::bind_aten_sequence(m);
  tessera::python::bind_graph_kernel(m);
  tessera::python::bind_dynamic(m);
  tessera::python::bind_layout(m);
  tessera::python::bind_attention(m);
}
