// The expression frontend for Python (tessera.op): parse and check sources, derive output
// shapes, build tensor-expression definitions. Errors in a source raise
// tessera._C.ExpressionError, a ValueError whose message points at the column, with the
// attributes `line`, `column` (1-based; 0 when the error has no position) and `detail`.
#include <pybind11/stl.h>

#include <map>
#include <regex>
#include <string>
#include <vector>

#include "frontend/expr_dynamic.h"
#include "frontend/expr_error.h"
#include "frontend/expr_parser.h"
#include "frontend/expr_to_te.h"
#include "ir/simplify.h"
#include "python/bindings.h"

namespace py = pybind11;

namespace tessera::python {

namespace {

using frontend::ExpressionError;

PyObject* g_expression_error = nullptr;  // the Python class, owned by the module

// Runs `f`, raising ExpressionError as the Python class with position attributes. Done here
// rather than by a registered translator alone so the mapping does not depend on the order in
// which translators were registered (the generic tessera.Error one would otherwise win).
template <typename F>
auto translate_errors(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const ExpressionError& e) {
    py::object cls = py::reinterpret_borrow<py::object>(g_expression_error);
    py::object exc = cls(e.what());
    exc.attr("line") = e.line();
    exc.attr("column") = e.column();
    exc.attr("detail") = e.detail();
    PyErr_SetObject(g_expression_error, exc.ptr());
    throw py::error_already_set();
  }
}

// shapes= of tessera.op: iterator name -> int, or defined tensor name -> list of ints.
frontend::ExtentHints to_hints(const py::dict& extents) {
  frontend::ExtentHints h;
  for (const auto& [key, value] : extents) {
    std::string name = key.cast<std::string>();
    if (py::isinstance<py::int_>(value)) {
      h.iterators[name] = value.cast<int64_t>();
    } else {
      h.tensors[name] = value.cast<std::vector<int64_t>>();
    }
  }
  return h;
}

std::map<std::string, frontend::InputSpec> to_specs(
    const std::map<std::string, std::vector<int64_t>>& shapes,
    const std::map<std::string, std::string>& dtypes) {
  std::map<std::string, frontend::InputSpec> specs;
  for (const auto& [name, dims] : shapes) {
    frontend::InputSpec& s = specs[name];
    for (int64_t d : dims) s.shape.push_back(ir::int_imm(d));
    auto dt = dtypes.find(name);
    if (dt != dtypes.end()) s.dtype = ir::dtype_from_name(dt->second);
  }
  return specs;
}

// A shape formula for Python: an int, ("dim", input_index, dim_index) or (op, a, b).
py::object formula(const ir::Expr& e,
                   const std::map<const ir::ExprNode*, std::pair<int, int>>& dims) {
  if (e->is_const_int()) return py::int_(e->int_value);
  if (e->is_var()) {
    auto it = dims.find(e.get());
    TESSERA_CHECK(it != dims.end()) << "shape formula uses an unknown variable " << e->name;
    return py::make_tuple("dim", it->second.first, it->second.second);
  }
  const char* op = nullptr;
  switch (e->kind) {
    case ir::ExprKind::kAdd:
      op = "add";
      break;
    case ir::ExprKind::kSub:
      op = "sub";
      break;
    case ir::ExprKind::kMul:
      op = "mul";
      break;
    case ir::ExprKind::kFloorDiv:
      op = "floordiv";
      break;
    case ir::ExprKind::kFloorMod:
      op = "mod";
      break;
    case ir::ExprKind::kMin:
      op = "min";
      break;
    case ir::ExprKind::kMax:
      op = "max";
      break;
    default:
      TESSERA_FAIL() << "shape formula has an unsupported node " << ir::expr_kind_name(e->kind);
  }
  return py::make_tuple(op, formula(e->operands[0], dims), formula(e->operands[1], dims));
}

// Input specs with one size variable per dim (ranks from `ranks`, else from the accesses), so
// shapes come out as formulas; `dims` maps each variable to (input index, dim).
std::map<std::string, frontend::InputSpec> symbolic_specs(
    const frontend::Program& p, const std::map<std::string, int>& ranks,
    const std::map<std::string, std::string>& dtypes,
    std::map<const ir::ExprNode*, std::pair<int, int>>* dims) {
  std::map<std::string, frontend::InputSpec> specs;
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    const std::string& name = p.inputs[i];
    auto r = ranks.find(name);
    int rank = r != ranks.end() ? r->second : p.ndim.at(name);
    frontend::InputSpec& s = specs[name];
    for (int d = 0; d < rank; ++d) {
      ir::Var v = ir::size_var(name + "_" + std::to_string(d), 1);
      (*dims)[v.get()] = {static_cast<int>(i), d};
      s.shape.push_back(v);
    }
    auto dt = dtypes.find(name);
    if (dt != dtypes.end()) s.dtype = ir::dtype_from_name(dt->second);
  }
  return specs;
}

}  // namespace

void bind_frontend(py::module_& m) {
  static py::exception<ExpressionError>& cls =
      py::register_exception<ExpressionError>(m, "ExpressionError", PyExc_ValueError);
  g_expression_error = cls.ptr();

  m.def(
      "parse_expression",
      [](const std::string& source, const py::dict& extents) {
        return translate_errors([&] {
          frontend::Program p = frontend::parse_expression(source);
          // Shape inference over symbolic sizes reports, before any call, the errors that do not
          // depend on the sizes: an extent nothing determines, shapes= naming nothing.
          std::map<const ir::ExprNode*, std::pair<int, int>> dims;
          std::map<std::string, std::vector<ir::Expr>> shapes;
          for (const auto& [name, spec] : symbolic_specs(p, {}, {}, &dims))
            shapes[name] = spec.shape;
          frontend::infer_shapes(p, shapes, to_hints(extents));
          py::dict info;
          info["inputs"] = p.inputs;
          info["output"] = p.output_name();
          std::vector<std::string> intermediates, statements;
          for (const frontend::Statement& s : p.statements) {
            if (&s != &p.output()) intermediates.push_back(s.target);
            statements.push_back(frontend::statement_to_string(s));
          }
          info["intermediates"] = intermediates;
          info["statements"] = statements;
          info["ndim"] = p.ndim;
          return info;
        });
      },
      py::arg("source"), py::arg("extents") = py::dict(),
      "Parses and checks an expression (with tessera.op's shapes= as `extents`); returns "
      "{inputs, output, intermediates, statements, ndim}. Raises ExpressionError (a ValueError) "
      "pointing at the column of a mistake.");

  m.def(
      "expression_to_te",
      [](const std::string& source, const std::map<std::string, std::vector<int64_t>>& shapes,
         const std::map<std::string, std::string>& dtypes, const py::dict& extents) {
        return translate_errors([&] {
          frontend::Program p = frontend::parse_expression(source);
          frontend::TeProgram te =
              frontend::expression_to_te(p, to_specs(shapes, dtypes), to_hints(extents));
          std::vector<PyTensor> outputs{PyTensor{te.output}}, inputs;
          for (const ir::Tensor& t : te.inputs) inputs.push_back(PyTensor{t});
          return py::make_tuple(outputs, inputs);
        });
      },
      py::arg("source"), py::arg("shapes"),
      py::arg("dtypes") = std::map<std::string, std::string>{}, py::arg("extents") = py::dict(),
      "Tensor-expression definitions for inputs of the given shapes ({name: [sizes]}) and dtypes "
      "({name: 'float32', ...}, float32 by default); `extents` is tessera.op's shapes= "
      "({iterator: n} or {tensor: [sizes]}). Returns (outputs, inputs) as Tensor handles, "
      "inputs in order of first appearance.");

  m.def(
      "expression_dynamic_dims",
      [](const std::string& source, const std::string& name) {
        return translate_errors([&] {
          std::vector<std::pair<int, int>> out;
          for (const frontend::InputDim& d :
               frontend::dynamic_dims(frontend::parse_expression(source), name)) {
            out.push_back({d.input, d.dim});
          }
          return out;
        });
      },
      py::arg("source"), py::arg("name"),
      "The (input index, dim) pairs a name of tessera.op's dynamic= stands for: an iterator (the "
      "input dims it indexes by itself) or 'A.size(d)'. Raises ExpressionError if none.");

  m.def(
      "expression_to_te_dynamic",
      [](const std::string& source, const std::map<std::string, std::vector<int64_t>>& shapes,
         const std::map<std::string, std::string>& dtypes, const py::dict& extents,
         const std::vector<std::tuple<std::string, int64_t, int64_t>>& dynamic) {
        return translate_errors([&] {
          frontend::Program p = frontend::parse_expression(source);
          std::map<std::string, frontend::InputSpec> specs = to_specs(shapes, dtypes);
          for (const auto& [name, lo, hi] : dynamic) {
            // "A.size(0)" becomes the variable A_size_0_ (names reach generated code).
            const ir::Var v =
                ir::size_var(std::regex_replace(name, std::regex("\\W"), "_"), lo, hi);
            for (const frontend::InputDim& d : frontend::dynamic_dims(p, name)) {
              specs.at(p.inputs.at(static_cast<size_t>(d.input))).shape.at(d.dim) = v;
            }
          }
          frontend::TeProgram te = frontend::expression_to_te(p, specs, to_hints(extents));
          std::vector<PyTensor> outputs{PyTensor{te.output}}, inputs;
          for (const ir::Tensor& t : te.inputs) inputs.push_back(PyTensor{t});
          return py::make_tuple(outputs, inputs);
        });
      },
      py::arg("source"), py::arg("shapes"), py::arg("dtypes"), py::arg("extents"),
      py::arg("dynamic"),
      "expression_to_te with the input dims of each dynamic size (name, lo, hi) replaced by one "
      "size variable `name` with range [lo, hi] (the other dims as `shapes` gives them).");

  m.def(
      "expression_output_shape",
      [](const std::string& source, const std::map<std::string, std::vector<int64_t>>& shapes,
         const py::dict& extents) {
        return translate_errors([&] {
          frontend::Program p = frontend::parse_expression(source);
          return frontend::expression_output_shape(p, shapes, to_hints(extents));
        });
      },
      py::arg("source"), py::arg("shapes"), py::arg("extents") = py::dict(),
      "Output shape for concrete input shapes, with every shape check, without building.");

  m.def(
      "expression_signature",
      [](const std::string& source, const std::map<std::string, int>& ranks,
         const std::map<std::string, std::string>& dtypes, const py::dict& extents) {
        return translate_errors([&] {
          frontend::Program p = frontend::parse_expression(source);
          std::map<const ir::ExprNode*, std::pair<int, int>> dims;
          auto specs = symbolic_specs(p, ranks, dtypes, &dims);
          frontend::TeProgram te = frontend::expression_to_te(p, specs, to_hints(extents));
          py::list shape;
          for (const ir::Expr& d : te.output->shape) shape.append(formula(ir::simplify(d), dims));
          return py::make_tuple(std::string(ir::dtype_name(te.output->dtype)), shape);
        });
      },
      py::arg("source"), py::arg("ranks"), py::arg("dtypes"), py::arg("extents") = py::dict(),
      "Output dtype and shape formulas for inputs of the given ranks and dtypes, valid for any "
      "sizes: each dim is an int, ('dim', input_index, dim) or (op, a, b) with op in add, sub, "
      "mul, floordiv, mod, min, max (for fake tensors with symbolic sizes).");
}

}  // namespace tessera::python
