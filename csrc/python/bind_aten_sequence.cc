// _C.AtenSequence: a run of ATen operators called from C++ (python/aten_sequence.h), built from
// the runner's description of its steps:
//   ("op", "aten::name", "overload", [operand...], {name: operand}, out, [dead slot...])
//   ("getitem", source, index, out, [dead slot...])
//   ("alias", source, out, [dead slot...])
//   ("program", _C.Program, [operand...], [dead slot...])
// where an operand is ("slot", i), ("slots", [i or -1 for None...]) or ("const", value).
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/jit/python/pybind_utils.h>

#include <string>
#include <utility>
#include <vector>

#include "python/aten_sequence.h"
#include "python/bindings.h"
#include "util/check.h"

namespace py = pybind11;

namespace tessera::python {

namespace {

bool is_tensor_list(const c10::TypePtr& type, bool* optional_elements) {
  const auto list = type->cast<c10::ListType>();
  if (!list) return false;
  c10::TypePtr elem = list->getElementType();
  *optional_elements = false;
  if (auto opt = elem->cast<c10::OptionalType>()) {
    *optional_elements = true;
    elem = opt->getElementType();
  }
  return elem->kind() == c10::TypeKind::TensorType;
}

AtenOperand operand_from(const py::handle& desc, const c10::Argument& arg) {
  const py::tuple t = py::reinterpret_borrow<py::tuple>(desc);
  const std::string kind = t[0].cast<std::string>();
  AtenOperand o;
  if (kind == "slot") {
    o.kind = AtenOperand::Kind::kSlot;
    o.slot = t[1].cast<int>();
  } else if (kind == "slots") {
    TESSERA_CHECK(is_tensor_list(arg.type(), &o.optional_elements))
        << "argument " << arg.name() << " is a " << arg.type()->str() << ", not a tensor list";
    o.kind = AtenOperand::Kind::kSlotList;
    o.slots = t[1].cast<std::vector<int>>();
  } else {
    TESSERA_CHECK(kind == "const") << "unknown operand kind " << kind;
    o.constant = torch::jit::toIValue(t[1], arg.type());
  }
  return o;
}

// Operands in schema order: positional, then by keyword, then the schema's default.
std::vector<AtenOperand> operands_from(const c10::FunctionSchema& schema, const py::list& args,
                                       const py::dict& kwargs) {
  const std::vector<c10::Argument>& params = schema.arguments();
  TESSERA_CHECK(args.size() <= params.size())
      << schema.name() << ": " << args.size() << " arguments for " << params.size();
  std::vector<AtenOperand> out;
  size_t used_kwargs = 0;
  for (size_t k = 0; k < params.size(); ++k) {
    const c10::Argument& a = params[k];
    const py::str name(a.name());
    if (k < args.size()) {
      out.push_back(operand_from(args[k], a));
    } else if (kwargs.contains(name)) {
      out.push_back(operand_from(kwargs[name], a));
      ++used_kwargs;
    } else {
      TESSERA_CHECK(a.default_value().has_value())
          << schema.name() << ": no value for argument " << a.name();
      AtenOperand o;
      o.constant = *a.default_value();
      out.push_back(std::move(o));
    }
  }
  TESSERA_CHECK(used_kwargs == kwargs.size()) << schema.name() << ": unknown keyword argument";
  return out;
}

AtenStep step_from(const py::handle& desc) {
  const py::tuple t = py::reinterpret_borrow<py::tuple>(desc);
  const std::string kind = t[0].cast<std::string>();
  AtenStep s;
  if (kind == "op") {
    s.op = find_operator(t[1].cast<std::string>(), t[2].cast<std::string>());
    s.operands = operands_from(s.op->schema(), t[3].cast<py::list>(), t[4].cast<py::dict>());
    s.out = t[5].cast<int>();
    s.dead_after = t[6].cast<std::vector<int>>();
  } else if (kind == "getitem") {
    s.kind = AtenStep::Kind::kGetItem;
    s.source = t[1].cast<int>();
    s.index = t[2].cast<int>();
    s.out = t[3].cast<int>();
    s.dead_after = t[4].cast<std::vector<int>>();
  } else if (kind == "program") {
    s.kind = AtenStep::Kind::kProgram;
    s.program = t[1].cast<std::shared_ptr<runtime::Program>>();
    for (const py::handle& o : t[2].cast<py::list>()) {
      const py::tuple d = py::reinterpret_borrow<py::tuple>(o);
      AtenOperand a;
      if (d[0].cast<std::string>() == "slot") {
        a.kind = AtenOperand::Kind::kSlot;
        a.slot = d[1].cast<int>();
      } else {
        TESSERA_CHECK(d[0].cast<std::string>() == "const") << "a program buffer is a slot or "
                                                              "a constant";
        a.constant = THPVariable_Check(d[1].ptr()) ? c10::IValue(THPVariable_Unpack(d[1].ptr()))
                                                   : c10::IValue(d[1].cast<int64_t>());
      }
      s.operands.push_back(std::move(a));
    }
    s.dead_after = t[3].cast<std::vector<int>>();
  } else {
    TESSERA_CHECK(kind == "alias") << "unknown step kind " << kind;
    s.kind = AtenStep::Kind::kAlias;
    s.source = t[1].cast<int>();
    s.out = t[2].cast<int>();
    s.dead_after = t[3].cast<std::vector<int>>();
  }
  return s;
}

// An input value: a tensor or a Python scalar (the runner only passes values of these types).
c10::IValue value_from(const py::handle& obj) {
  PyObject* p = obj.ptr();
  if (THPVariable_Check(p)) return THPVariable_Unpack(p);
  if (PyBool_Check(p)) return c10::IValue(p == Py_True);
  if (PyLong_Check(p)) return c10::IValue(static_cast<int64_t>(obj.cast<int64_t>()));
  if (PyFloat_Check(p)) return c10::IValue(PyFloat_AS_DOUBLE(p));
  if (p == Py_None) return c10::IValue();
  throw py::type_error(std::string("AtenSequence: an input of type ") + Py_TYPE(p)->tp_name +
                       " (tensors and scalars only)");
}

py::tuple run_released(const AtenSequence& seq, std::vector<c10::IValue> values) {
  std::vector<c10::IValue> out;
  {
    py::gil_scoped_release release;  // as torch's own bindings do around operators
    out = seq.run(std::move(values));
  }
  py::tuple result(out.size());
  for (size_t i = 0; i < out.size(); ++i) result[i] = torch::jit::toPyObject(std::move(out[i]));
  return result;
}

}  // namespace

void bind_aten_sequence(py::module_& m) {
  py::class_<AtenSequence, std::shared_ptr<AtenSequence>>(m, "AtenSequence")
      .def(py::init([](int num_slots, std::vector<int> inputs, const py::list& steps,
                       std::vector<int> outputs) {
             std::vector<AtenStep> st;
             st.reserve(steps.size());
             for (const py::handle& d : steps) st.push_back(step_from(d));
             return std::make_shared<AtenSequence>(num_slots, std::move(inputs), std::move(st),
                                                   std::move(outputs));
           }),
           py::arg("num_slots"), py::arg("inputs"), py::arg("steps"), py::arg("outputs"))
      // Runs the operators on the inputs (tensors or scalars); a tuple of the outputs.
      .def("__call__",
           [](const AtenSequence& seq, const py::args& args) {
             std::vector<c10::IValue> values;
             values.reserve(args.size());
             for (const py::handle& a : args) values.push_back(value_from(a));
             return run_released(seq, std::move(values));
           })
      // The same on a list of inputs that it empties, so that an input whose last reader is
      // in the sequence is freed there (the runner drops its own reference before the call).
      .def("boxed",
           [](const AtenSequence& seq, const py::list& args) {
             std::vector<c10::IValue> values;
             values.reserve(args.size());
             for (const py::handle& a : args) values.push_back(value_from(a));
             PyList_SetSlice(args.ptr(), 0, PyList_GET_SIZE(args.ptr()), nullptr);
             return run_released(seq, std::move(values));
           })
      .def("__len__", &AtenSequence::size);
}

}  // namespace tessera::python
