// _C.KernelCall: a size-generic kernel called with torch tensors in one C++ step
// (python/kernel_call.h), the fast path of kernel_build.KernelCall.
//
//   fast = _C.KernelCall(kernel.runner(), [packed_weight_or_None per input], [torch dtypes])
//   out = fast((s0, s1), (x, w))   # a tensor, a tuple of tensors, or None: a weight's packed
//                                  # copy is not current (the caller packs it again)
#include <pybind11/stl.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>

#include <memory>
#include <optional>
#include <vector>

#include "python/bindings.h"
#include "python/kernel_call.h"
#include "util/check.h"

namespace py = pybind11;

namespace tessera::python {

void bind_kernel_call(py::module_& m) {
  py::class_<KernelRunner>(m, "KernelRunner",
                           "A kernel's checked run and output shapes, for _C.KernelCall "
                           "(from Kernel.runner() or dynamic.DynamicKernel.runner()).");
  py::class_<KernelCall, std::unique_ptr<KernelCall>>(m, "KernelCall")
      .def(py::init([](KernelRunner runner,
                       const std::vector<std::optional<std::shared_ptr<PackedWeight>>>& packed,
                       const std::vector<at::ScalarType>& dtypes) {
             std::vector<std::shared_ptr<const PackedWeight>> weights;
             for (const auto& p : packed) weights.push_back(p ? *p : nullptr);
             return std::make_unique<KernelCall>(std::move(runner), std::move(weights), dtypes);
           }),
           py::arg("runner"), py::arg("packed"), py::arg("dtypes"))
      .def(
          "__call__",
          [](const KernelCall& k, const py::iterable& sizes,
             const py::tuple& inputs) -> py::object {
            std::vector<int64_t> size_values;
            for (py::handle h : sizes) size_values.push_back(h.cast<int64_t>());
            std::vector<at::Tensor> tensors;
            tensors.reserve(inputs.size());
            for (py::handle h : inputs) {
              TESSERA_CHECK(THPVariable_Check(h.ptr()))
                  << "a kernel input of type " << Py_TYPE(h.ptr())->tp_name << " (tensors only)";
              tensors.push_back(THPVariable_Unpack(h.ptr()));
            }
            std::optional<std::vector<at::Tensor>> outputs;
            {
              py::gil_scoped_release release;  // kernels run on Tessera's own thread pool
              outputs = k.call(tensors, size_values);
            }
            if (!outputs) return py::none();
            if (outputs->size() == 1) {
              return py::reinterpret_steal<py::object>(THPVariable_Wrap((*outputs)[0]));
            }
            py::tuple result(outputs->size());
            for (size_t o = 0; o < outputs->size(); ++o) {
              result[o] = py::reinterpret_steal<py::object>(THPVariable_Wrap((*outputs)[o]));
            }
            return std::move(result);
          },
          py::arg("sizes"), py::arg("inputs"),
          "Runs the kernel on `inputs` (a tuple of tensors) at `sizes`: its output, a tuple of "
          "outputs, or None where a packed weight must be packed again first (nothing ran).")
      .def_property_readonly("calls", &KernelCall::calls, "Calls that ran.")
      .def_property_readonly("declined", &KernelCall::declined,
                             "Calls declined: a packed weight was not current.");
}

}  // namespace tessera::python
