// _C.GraphKernel: a compiled graph's custom operator kernel in C++ (python/graph_kernel.h).
//
//   k = _C.GraphKernel("tessera::graph_3_inference", num_arguments, num_returns, fallback)
//   k.add_plan(signature, sequence, inputs, outputs, clone)
//
// Constructing it registers the CPU kernel of an operator graph_op.py has defined; the
// registration ends when the object is freed (or close() is called). `fallback(*args)` is the
// Python kernel for inputs no plan matches: it returns a tensor, or a tuple of num_returns
// tensors. A signature has one entry per operator argument: a tensor (a meta tensor will do)
// whose dtype, sizes and strides inputs must have, or the exact value of a scalar argument.
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/jit/python/pybind_utils.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "python/bindings.h"
#include "python/graph_kernel.h"
#include "python/packed_weight.h"
#include "util/check.h"

namespace py = pybind11;

namespace tessera::python {

namespace {

ArgumentSignature signature_of(const py::handle& h) {
  ArgumentSignature s;
  PyObject* p = h.ptr();
  if (THPVariable_Check(p)) {
    const at::Tensor& t = THPVariable_Unpack(p);
    s.is_tensor = true;
    s.dtype = t.scalar_type();
    s.sizes = t.sizes().vec();
    s.strides = t.strides().vec();
  } else if (PyBool_Check(p)) {
    s.scalar = c10::IValue(p == Py_True);
  } else if (PyLong_Check(p)) {
    s.scalar = c10::IValue(h.cast<int64_t>());
  } else if (PyFloat_Check(p)) {
    s.scalar = c10::IValue(PyFloat_AS_DOUBLE(p));
  } else {
    TESSERA_CHECK(p == Py_None) << "a graph signature entry of type " << Py_TYPE(p)->tp_name
                                << " (tensors and scalars only)";
  }
  return s;
}

at::Tensor returned_tensor(const py::handle& h) {
  TESSERA_CHECK(THPVariable_Check(h.ptr()))
      << "a graph operator's Python kernel returned a " << Py_TYPE(h.ptr())->tp_name
      << " where its schema declares a Tensor";
  return THPVariable_Unpack(h.ptr());
}

// The Python kernel as a GraphKernel::Fallback. The function object is released under the GIL
// (the kernel may be destroyed by the dispatcher, not by Python).
GraphKernel::Fallback python_fallback(py::function fn, size_t num_arguments, size_t num_returns) {
  std::shared_ptr<py::function> held(new py::function(std::move(fn)), [](py::function* f) {
    if (!Py_IsInitialized()) return;  // interpreter gone: leak rather than touch it
    py::gil_scoped_acquire gil;
    delete f;
  });
  return [held, num_arguments, num_returns](torch::jit::Stack* stack) {
    py::gil_scoped_acquire gil;
    const size_t base = stack->size() - num_arguments;
    py::tuple args(num_arguments);
    for (size_t i = 0; i < num_arguments; ++i) {
      args[i] = torch::jit::toPyObject(std::move((*stack)[base + i]));
    }
    torch::jit::drop(*stack, num_arguments);
    const py::object result = (*held)(*args);
    if (num_returns == 1) {
      stack->push_back(returned_tensor(result));
      return;
    }
    const py::tuple outs = py::cast<py::tuple>(result);
    TESSERA_CHECK(outs.size() == num_returns) << "a graph operator's Python kernel returned "
                                              << outs.size() << " values for " << num_returns;
    for (const py::handle& o : outs) stack->push_back(returned_tensor(o));
  };
}

// The Python object: the kernel and its registration.
struct PyGraphKernel {
  std::shared_ptr<GraphKernel> kernel;
  std::unique_ptr<torch::Library> registration;
};

}  // namespace

void bind_graph_kernel(py::module_& m) {
  py::class_<PackedWeight, std::shared_ptr<PackedWeight>>(
      m, "PackedWeight",
      "The packed copy of a weight, shared with C++ callers (python/packed_weight.h).")
      .def(py::init<>())
      .def(
          "set",
          [](PackedWeight& self, const at::Tensor& packed, const at::Tensor& source,
             std::optional<int64_t> version) { self.set(packed, source, version); },
          py::arg("packed"), py::arg("source"), py::arg("version"),
          "Records a copy made from `source` at `version` (None: an inference tensor).")
      .def(
          "current",
          [](const PackedWeight& self, const at::Tensor& weight) -> std::optional<uintptr_t> {
            const std::optional<void*> p = self.current(weight);
            if (!p) return std::nullopt;
            return reinterpret_cast<uintptr_t>(*p);
          },
          py::arg("weight"),
          "The copy's data pointer if it was made from `weight` as it is now, else None.");

  py::class_<PyGraphKernel>(m, "GraphKernel")
      .def(py::init([](const std::string& qualified_name, size_t num_arguments, size_t num_returns,
                       py::function fallback) {
             auto kernel = std::make_shared<GraphKernel>(
                 num_arguments, num_returns,
                 python_fallback(std::move(fallback), num_arguments, num_returns));
             auto registration = GraphKernel::register_cpu_kernel(qualified_name, kernel);
             return PyGraphKernel{std::move(kernel), std::move(registration)};
           }),
           py::arg("qualified_name"), py::arg("num_arguments"), py::arg("num_returns"),
           py::arg("fallback"))
      .def(
          "add_plan",
          [](PyGraphKernel& self, const py::list& signature, std::shared_ptr<AtenSequence> sequence,
             std::vector<int> inputs, std::vector<int> outputs, std::vector<bool> clone,
             const std::vector<std::pair<int, std::shared_ptr<PackedWeight>>>& packed) {
            GraphPlan plan;
            for (const py::handle& h : signature) plan.signature.push_back(signature_of(h));
            plan.sequence = std::move(sequence);
            plan.inputs = std::move(inputs);
            for (const auto& [argument, weight] : packed) plan.packed.push_back({argument, weight});
            plan.outputs = std::move(outputs);
            plan.clone = std::move(clone);
            self.kernel->add(std::move(plan));
          },
          py::arg("signature"), py::arg("sequence"), py::arg("inputs"), py::arg("outputs"),
          py::arg("clone"),
          py::arg("packed") = std::vector<std::pair<int, std::shared_ptr<PackedWeight>>>{})
      // Deregisters the kernel now (the operator then has no CPU kernel).
      .def("close", [](PyGraphKernel& self) { self.registration.reset(); })
      .def_property_readonly("num_plans",
                             [](const PyGraphKernel& self) { return self.kernel->num_plans(); })
      .def_property_readonly("plan_calls",
                             [](const PyGraphKernel& self) { return self.kernel->plan_calls(); })
      .def_property_readonly("fallback_calls", [](const PyGraphKernel& self) {
        return self.kernel->fallback_calls();
      });
}

}  // namespace tessera::python
