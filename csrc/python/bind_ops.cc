// The operator library for Python (thin: each op builds tensor-expression definitions). The
// torch.compile backend (tessera/backend/lowering.py) maps ATen operators onto these.
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ops/extra_elementwise.h"
#include "ops/extra_index.h"
#include "ops/ops.h"
#include "python/bindings.h"
#include "schedule/default_schedule.h"
#include "schedule/stage_plan.h"

namespace py = pybind11;

namespace tessera::python {

std::vector<ir::Expr> to_shape(const py::sequence& seq);

namespace {

using T = const PyTensor&;
using OptT = const std::optional<PyTensor>&;

ir::Tensor opt(OptT t) { return t ? t->tensor : nullptr; }
PyTensor wrap(ir::Tensor t) { return PyTensor{std::move(t)}; }

template <typename F>
void unary(py::module_& m, const char* name, F f) {
  m.def(
      name, [f](T x) { return wrap(f(x.tensor)); }, py::arg("x"));
}

// The three overloads of a broadcasting binary op: (tensor, tensor), (tensor, scalar),
// (scalar, tensor). Tensor-tensor comes first so pybind11 tries it first.
template <typename FTT, typename FTS, typename FST>
void binary(py::module_& m, const char* name, FTT tt, FTS ts, FST st) {
  m.def(
      name, [tt](T a, T b) { return wrap(tt(a.tensor, b.tensor)); }, py::arg("a"), py::arg("b"));
  m.def(
      name, [ts](T a, double b) { return wrap(ts(a.tensor, b)); }, py::arg("a"), py::arg("b"));
  m.def(
      name, [st](double a, T b) { return wrap(st(a, b.tensor)); }, py::arg("a"), py::arg("b"));
}

#define TESSERA_BIND_BINARY(m, fn)                                                    \
  binary(                                                                             \
      m, #fn, [](const ir::Tensor& a, const ir::Tensor& b) { return ops::fn(a, b); }, \
      [](const ir::Tensor& a, double b) { return ops::fn(a, b); },                    \
      [](double a, const ir::Tensor& b) { return ops::fn(a, b); })

void bind_linalg_and_nn(py::module_& m) {
  m.def(
      "matmul",
      [](T a, T b, bool ta, bool tb) { return wrap(ops::matmul(a.tensor, b.tensor, ta, tb)); },
      py::arg("a"), py::arg("b"), py::arg("trans_a") = false, py::arg("trans_b") = false);
  m.def(
      "batch_matmul",
      [](T a, T b, bool ta, bool tb) {
        return wrap(ops::batch_matmul(a.tensor, b.tensor, ta, tb));
      },
      py::arg("a"), py::arg("b"), py::arg("trans_a") = false, py::arg("trans_b") = false);
  m.def(
      "dense", [](T x, T w, OptT b) { return wrap(ops::dense(x.tensor, w.tensor, opt(b))); },
      py::arg("x"), py::arg("w"), py::arg("bias") = py::none());
  m.def(
      "conv2d",
      [](T x, T w, OptT b, ops::Int2 stride, ops::Int2 padding, ops::Int2 dilation,
         int64_t groups) {
        return wrap(ops::conv2d(x.tensor, w.tensor, opt(b), stride, padding, dilation, groups));
      },
      py::arg("x"), py::arg("w"), py::arg("bias") = py::none(), py::arg("stride") = ops::Int2{1, 1},
      py::arg("padding") = ops::Int2{0, 0}, py::arg("dilation") = ops::Int2{1, 1},
      py::arg("groups") = 1);
  m.def(
      "conv_transpose2d",
      [](T x, T w, OptT b, ops::Int2 stride, ops::Int2 padding, ops::Int2 output_padding,
         ops::Int2 dilation, int64_t groups) {
        return wrap(ops::conv_transpose2d(x.tensor, w.tensor, opt(b), stride, padding,
                                          output_padding, dilation, groups));
      },
      py::arg("x"), py::arg("w"), py::arg("bias") = py::none(), py::arg("stride") = ops::Int2{1, 1},
      py::arg("padding") = ops::Int2{0, 0}, py::arg("output_padding") = ops::Int2{0, 0},
      py::arg("dilation") = ops::Int2{1, 1}, py::arg("groups") = 1);
  m.def(
      "avg_pool2d",
      [](T x, ops::Int2 k, ops::Int2 s, ops::Int2 p, bool ceil_mode, bool count_include_pad) {
        return wrap(ops::avg_pool2d(x.tensor, k, s, p, ceil_mode, count_include_pad));
      },
      py::arg("x"), py::arg("kernel"), py::arg("stride") = ops::Int2{0, 0},
      py::arg("padding") = ops::Int2{0, 0}, py::arg("ceil_mode") = false,
      py::arg("count_include_pad") = true);
  m.def(
      "max_pool2d",
      [](T x, ops::Int2 k, ops::Int2 s, ops::Int2 p, ops::Int2 d, bool ceil_mode) {
        return wrap(ops::max_pool2d(x.tensor, k, s, p, d, ceil_mode));
      },
      py::arg("x"), py::arg("kernel"), py::arg("stride") = ops::Int2{0, 0},
      py::arg("padding") = ops::Int2{0, 0}, py::arg("dilation") = ops::Int2{1, 1},
      py::arg("ceil_mode") = false);
  m.def(
      "softmax", [](T x, int64_t axis) { return wrap(ops::softmax(x.tensor, axis)); }, py::arg("x"),
      py::arg("axis") = -1);
  m.def(
      "log_softmax", [](T x, int64_t axis) { return wrap(ops::log_softmax(x.tensor, axis)); },
      py::arg("x"), py::arg("axis") = -1);
  m.def(
      "layer_norm",
      [](T x, int64_t nd, OptT g, OptT b, double eps) {
        return wrap(ops::layer_norm(x.tensor, nd, opt(g), opt(b), eps));
      },
      py::arg("x"), py::arg("normalized_ndim"), py::arg("gamma") = py::none(),
      py::arg("beta") = py::none(), py::arg("eps") = 1e-5);
}

void bind_reductions(py::module_& m) {
  using Reduce =
      ir::Tensor (*)(const ir::Tensor&, const std::vector<int64_t>&, bool, const std::string&);
  const std::pair<const char*, Reduce> reductions[] = {{"reduce_sum", &ops::reduce_sum},
                                                       {"reduce_mean", &ops::reduce_mean},
                                                       {"reduce_max", &ops::reduce_max},
                                                       {"reduce_min", &ops::reduce_min}};
  for (const auto& [name, fn] : reductions) {
    const std::string op_name = std::string(name).substr(7);  // "sum", "mean", ...
    m.def(
        name,
        [fn, op_name](T x, std::vector<int64_t> axes, bool keep) {
          return wrap(fn(x.tensor, axes, keep, op_name));
        },
        py::arg("x"), py::arg("axes") = std::vector<int64_t>{}, py::arg("keepdim") = false,
        "Reduction over `axes` (all axes when empty).");
  }
}

void bind_elementwise(py::module_& m) {
  TESSERA_BIND_BINARY(m, add);
  TESSERA_BIND_BINARY(m, sub);
  TESSERA_BIND_BINARY(m, mul);
  TESSERA_BIND_BINARY(m, div);
  TESSERA_BIND_BINARY(m, maximum);
  TESSERA_BIND_BINARY(m, minimum);
  TESSERA_BIND_BINARY(m, pow);
  unary(m, "neg", [](const ir::Tensor& x) { return ops::neg(x); });
  unary(m, "abs", [](const ir::Tensor& x) { return ops::abs(x); });
  unary(m, "relu", [](const ir::Tensor& x) { return ops::relu(x); });
  unary(m, "gelu", [](const ir::Tensor& x) { return ops::gelu(x); });
  unary(m, "tanh", [](const ir::Tensor& x) { return ops::tanh(x); });
  unary(m, "exp", [](const ir::Tensor& x) { return ops::exp(x); });
  unary(m, "log", [](const ir::Tensor& x) { return ops::log(x); });
  unary(m, "sqrt", [](const ir::Tensor& x) { return ops::sqrt(x); });
  unary(m, "rsqrt", [](const ir::Tensor& x) { return ops::rsqrt(x); });
  unary(m, "sigmoid", [](const ir::Tensor& x) { return ops::sigmoid(x); });
  unary(m, "erf", [](const ir::Tensor& x) { return ops::erf(x); });
  unary(m, "floor", [](const ir::Tensor& x) { return ops::floor(x); });
  unary(m, "ceil", [](const ir::Tensor& x) { return ops::ceil(x); });
  unary(m, "logical_not", [](const ir::Tensor& x) { return ops::logical_not(x); });
  m.def(
      "logical_and", [](T a, T b) { return wrap(ops::logical_and(a.tensor, b.tensor)); },
      py::arg("a"), py::arg("b"));
  m.def(
      "logical_or", [](T a, T b) { return wrap(ops::logical_or(a.tensor, b.tensor)); },
      py::arg("a"), py::arg("b"));
  m.def(
      "compare",
      [](T a, T b, const std::string& cmp) {
        return wrap(ops::compare(a.tensor, b.tensor, ops::compare_from_name(cmp)));
      },
      py::arg("a"), py::arg("b"), py::arg("cmp"), "Bool tensor a <cmp> b (eq ne lt le gt ge).");
  m.def(
      "compare",
      [](T a, double b, const std::string& cmp) {
        return wrap(ops::compare(a.tensor, b, ops::compare_from_name(cmp)));
      },
      py::arg("a"), py::arg("b"), py::arg("cmp"));
  m.def(
      "floordiv", [](T a, T b) { return wrap(ops::floordiv(a.tensor, b.tensor)); },
      py::arg("a"), py::arg("b"), "Integer a // b (rounds toward -inf, as Python and torch).");
  m.def(
      "floormod", [](T a, T b) { return wrap(ops::floormod(a.tensor, b.tensor)); },
      py::arg("a"), py::arg("b"), "Integer a % b (the divisor's sign, as Python and torch).");
  m.def(
      "where", [](T c, T a, T b) { return wrap(ops::where(c.tensor, a.tensor, b.tensor)); },
      py::arg("cond"), py::arg("a"), py::arg("b"));
  m.def(
      "cast",
      [](T x, const std::string& dtype) {
        return wrap(ops::cast(x.tensor, ir::dtype_from_name(dtype)));
      },
      py::arg("x"), py::arg("dtype"));
  m.def(
      "clamp",
      [](T x, std::optional<double> lo, std::optional<double> hi) {
        return wrap(ops::clamp(x.tensor, lo, hi));
      },
      py::arg("x"), py::arg("lo") = py::none(), py::arg("hi") = py::none());
  m.def(
      "full",
      [](const py::sequence& shape, double value, const std::string& dtype) {
        return wrap(ops::full(to_shape(shape), value, ir::dtype_from_name(dtype)));
      },
      py::arg("shape"), py::arg("value"), py::arg("dtype") = "float32");
  m.def(
      "arange",
      [](int64_t n, double start, double step, const std::string& dtype) {
        return wrap(ops::arange(ir::int_imm(n), start, step, ir::dtype_from_name(dtype)));
      },
      py::arg("n"), py::arg("start") = 0.0, py::arg("step") = 1.0, py::arg("dtype") = "int64");
}

void bind_shape(py::module_& m) {
  m.def(
      "transpose",
      [](T x, std::vector<int64_t> perm) { return wrap(ops::permute(x.tensor, perm)); },
      py::arg("x"), py::arg("perm"));
  m.def(
      "permute", [](T x, std::vector<int64_t> perm) { return wrap(ops::permute(x.tensor, perm)); },
      py::arg("x"), py::arg("perm"));
  m.def(
      "reshape",
      [](T x, const py::sequence& shape) { return wrap(ops::reshape(x.tensor, to_shape(shape))); },
      py::arg("x"), py::arg("shape"));
  m.def(
      "concat",
      [](const std::vector<PyTensor>& xs, int64_t axis) {
        std::vector<ir::Tensor> ts;
        for (const PyTensor& x : xs) ts.push_back(x.tensor);
        return wrap(ops::concat(ts, axis));
      },
      py::arg("xs"), py::arg("axis"));
  m.def(
      "slice",
      [](T x, int64_t axis, int64_t start, std::optional<int64_t> end, int64_t step) {
        return wrap(ops::slice(x.tensor, axis, start, end.value_or(ops::kSliceEnd), step));
      },
      py::arg("x"), py::arg("axis"), py::arg("start") = 0, py::arg("end") = py::none(),
      py::arg("step") = 1);
  m.def(
      "pad",
      [](T x, const std::vector<std::pair<int64_t, int64_t>>& pads, double value) {
        return wrap(ops::pad(x.tensor, pads, value));
      },
      py::arg("x"), py::arg("pads"), py::arg("value") = 0.0);
  m.def(
      "broadcast_to",
      [](T x, const py::sequence& shape) {
        return wrap(ops::broadcast_to(x.tensor, to_shape(shape)));
      },
      py::arg("x"), py::arg("shape"));
  m.def(
      "index_select",
      [](T x, int64_t axis, T idx) { return wrap(ops::index_select(x.tensor, axis, idx.tensor)); },
      py::arg("x"), py::arg("axis"), py::arg("indices"),
      "x with dim `axis` replaced by the dims of `indices` (embedding, index_select).");
  m.def(
      "gather",
      [](T x, int64_t dim, T idx) { return wrap(ops::gather(x.tensor, dim, idx.tensor)); },
      py::arg("x"), py::arg("dim"), py::arg("index"));
}

// The default schedule of a kernel, without compiling it: tools and benchmarks derive variants
// from it.
void bind_schedule_query(py::module_& m) {
  m.def(
      "default_schedule",
      [](const std::vector<PyTensor>& outputs, const std::vector<PyTensor>& inputs,
         const std::optional<schedule::PlanChoices>& plan_choices) {
        const std::vector<ir::Tensor> outs = unwrap(outputs), ins = unwrap(inputs);
        schedule::StagePlan plan =
            schedule::plan_stages(outs, ins, plan_choices.value_or(schedule::PlanChoices{}));
        return schedule::default_schedule(plan, schedule::Target::host());
      },
      py::arg("outputs"), py::arg("inputs"), py::arg("plan") = py::none(),
      "The rules' schedule (KernelSchedule) of this kernel for the stage plan of `plan` "
      "(PlanChoices; the rules' plan by default), before any tuning (nothing is compiled).");
}

}  // namespace

void bind_ops(py::module_& m) {
  bind_linalg_and_nn(m);
  bind_reductions(m);
  bind_elementwise(m);
  bind_shape(m);
  bind_schedule_query(m);
}

}  // namespace tessera::python
