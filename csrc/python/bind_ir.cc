// IR handles for Python: placeholders, symbolic sizes, printing.
#include <pybind11/stl.h>

#include "ir/printer.h"
#include "ir/simplify.h"
#include "python/bindings.h"

namespace py = pybind11;

namespace tessera::python {

namespace {

// A shape entry from Python: an int or a symbolic size.
ir::Expr to_dim(const py::handle& h) {
  if (py::isinstance<PyExpr>(h)) return h.cast<PyExpr>().expr;
  return ir::int_imm(h.cast<int64_t>());
}

// Size arithmetic for symbolic shapes (Dynamo's SymInt expressions), simplified as built so
// that e.g. 1 * s stays the bare variable kernels read their sizes from.
using SizeOp = ir::Expr (*)(ir::Expr, ir::Expr);
PyExpr size_op(SizeOp op, const py::handle& a, const py::handle& b) {
  return PyExpr{ir::simplify(op(to_dim(a), to_dim(b)))};
}

void bind_size_arithmetic(py::class_<PyExpr>& cls) {
  struct Binary {
    const char* name;
    const char* reflected;
    SizeOp op;
  };
  const Binary binaries[] = {{"__add__", "__radd__", &ir::add},
                             {"__sub__", "__rsub__", &ir::sub},
                             {"__mul__", "__rmul__", &ir::mul},
                             {"__floordiv__", "__rfloordiv__", &ir::floordiv},
                             {"__mod__", "__rmod__", &ir::floormod}};
  for (const Binary& b : binaries) {
    SizeOp op = b.op;
    cls.def(b.name, [op](const py::object& x, const py::object& y) { return size_op(op, x, y); });
    cls.def(b.reflected,
            [op](const py::object& x, const py::object& y) { return size_op(op, y, x); });
  }
}

}  // namespace

std::vector<ir::Expr> to_shape(const py::sequence& seq) {
  std::vector<ir::Expr> out;
  for (const py::handle& h : seq) out.push_back(to_dim(h));
  return out;
}

void bind_ir(py::module_& m) {
  py::class_<PyExpr> expr(m, "Expr");
  expr.def("__repr__", [](const PyExpr& e) { return ir::to_string(e.expr); })
      .def_property_readonly("name", [](const PyExpr& e) { return e.expr->name; });
  bind_size_arithmetic(expr);
  py::class_<PyTensor>(m, "Tensor")
      .def_property_readonly("name", [](const PyTensor& t) { return t.tensor->name; })
      .def_property_readonly("dtype",
                             [](const PyTensor& t) { return ir::dtype_name(t.tensor->dtype); })
      .def_property_readonly("shape",
                             [](const PyTensor& t) {
                               py::list out;
                               for (const ir::Expr& d : t.tensor->shape) {
                                 if (d->is_const_int()) {
                                   out.append(d->int_value);
                                 } else {
                                   out.append(PyExpr{d});
                                 }
                               }
                               return out;
                             })
      .def("definition", [](const PyTensor& t) { return ir::to_string(t.tensor); })
      .def("__repr__", [](const PyTensor& t) { return "<tessera.Tensor " + t.tensor->name + ">"; });
  m.def(
      "size_var",
      [](const std::string& name, int64_t lo, int64_t hi) {
        return PyExpr{ir::size_var(name, lo, hi)};
      },
      py::arg("name"), py::arg("lo") = 0, py::arg("hi") = ir::kNoUpperBound,
      "A symbolic size known to lie in [lo, hi].");
  m.def(
      "placeholder",
      [](const std::string& name, const py::sequence& shape, const std::string& dtype) {
        return PyTensor{ir::placeholder(name, to_shape(shape), ir::dtype_from_name(dtype))};
      },
      py::arg("name"), py::arg("shape"), py::arg("dtype") = "float32",
      "A kernel input of the given shape (ints or size_var()s).");
}

}  // namespace tessera::python
