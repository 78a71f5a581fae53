#pragma once
// Registration functions of the tessera._C submodules, one translation unit each.
#include <pybind11/pybind11.h>

#include <vector>

#include "ir/tensor.h"

namespace tessera::python {

// Python-side handles to immutable IR nodes (pybind11 holders cannot point to const types).
struct PyExpr {
  ir::Expr expr;
};
struct PyTensor {
  ir::Tensor tensor;
};

// The IR tensors behind a list of handles (kernel outputs / inputs passed from Python).
inline std::vector<ir::Tensor> unwrap(const std::vector<PyTensor>& ts) {
  std::vector<ir::Tensor> out;
  out.reserve(ts.size());
  for (const PyTensor& t : ts) out.push_back(t.tensor);
  return out;
}

void bind_ir(pybind11::module_& m);
void bind_ops(pybind11::module_& m);
void bind_kernel(pybind11::module_& m);
void bind_kernel_call(pybind11::module_& m);
void bind_cuda(pybind11::module_& m);
void bind_runtime(pybind11::module_& m);
void bind_host_threads(pybind11::module_& m);
void bind_frontend(pybind11::module_& m);
void bind_db(pybind11::module_& m);
void bind_tune(pybind11::module_& m);
void bind_compile(pybind11::module_& m);
void bind_search(pybind11::module_& m);
void bind_runner(pybind11::module_& m);
void bind_reuse(pybind11::module_& m);
void bind_derive(pybind11::module_& m);
void bind_aten_sequence(pybind11::module_& m);
void bind_graph_kernel(pybind11::module_& m);
void bind_dynamic(pybind11::module_& m);
void bind_layout(pybind11::module_& m);
void bind_attention(pybind11::module_& m);

}  // namespace tessera::python
