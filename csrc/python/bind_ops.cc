// The operator library for Python (thin: each op builds tensor-expression definitions).
#include <pybind11/stl.h>

#include "ops/ops.h"
#include "python/bindings.h"

namespace py = pybind11;

namespace tessera::python {

std::vector<ir::Expr> to_shape(const py::sequence& seq);

namespace {

ir::Tensor opt(const std::optional<PyTensor>& t) { return t ? t->tensor : nullptr; }

template <typename F>
void unary(py::module_& m, const char* name, F f) {
  m.def(name, [f](const PyTensor& x) { return PyTensor{f(x.tensor)}; });
}

}  // namespace

void bind_ops(py::module_& m) {
  using T = const PyTensor&;
  m.def(
      "matmul",
      [](T a, T b, bool ta, bool tb) { return PyTensor{ops::matmul(a.tensor, b.tensor, ta, tb)}; },
      py::arg("a"), py::arg("b"), py::arg("trans_a") = false, py::arg("trans_b") = false);
  m.def(
      "batch_matmul",
      [](T a, T b, bool ta, bool tb) {
        return PyTensor{ops::batch_matmul(a.tensor, b.tensor, ta, tb)};
      },
      py::arg("a"), py::arg("b"), py::arg("trans_a") = false, py::arg("trans_b") = false);
  m.def(
      "dense",
      [](T x, T w, const std::optional<PyTensor>& b) {
        return PyTensor{ops::dense(x.tensor, w.tensor, opt(b))};
      },
      py::arg("x"), py::arg("w"), py::arg("bias") = py::none());
  m.def(
      "conv2d",
      [](T x, T w, const std::optional<PyTensor>& b, ops::Int2 stride, ops::Int2 padding,
         ops::Int2 dilation, int64_t groups) {
        return PyTensor{ops::conv2d(x.tensor, w.tensor, opt(b), stride, padding, dilation, groups)};
      },
      py::arg("x"), py::arg("w"), py::arg("bias") = py::none(),
      py::arg("stride") = ops::Int2{1, 1}, py::arg("padding") = ops::Int2{0, 0},
      py::arg("dilation") = ops::Int2{1, 1}, py::arg("groups") = 1);
  m.def(
      "avg_pool2d", [](T x, ops::Int2 k, ops::Int2 s) { return PyTensor{ops::avg_pool2d(x.tensor, k, s)}; },
      py::arg("x"), py::arg("kernel"), py::arg("stride") = ops::Int2{0, 0});
  m.def(
      "softmax", [](T x, int64_t axis) { return PyTensor{ops::softmax(x.tensor, axis)}; },
      py::arg("x"), py::arg("axis") = -1);
  m.def(
      "layer_norm",
      [](T x, int64_t nd, const std::optional<PyTensor>& g, const std::optional<PyTensor>& b,
         double eps) { return PyTensor{ops::layer_norm(x.tensor, nd, opt(g), opt(b), eps)}; },
      py::arg("x"), py::arg("normalized_ndim"), py::arg("gamma") = py::none(),
      py::arg("beta") = py::none(), py::arg("eps") = 1e-5);
  m.def(
      "reduce_sum",
      [](T x, std::vector<int64_t> axes, bool keep) {
        return PyTensor{ops::reduce_sum(x.tensor, axes, keep)};
      },
      py::arg("x"), py::arg("axes") = std::vector<int64_t>{}, py::arg("keepdim") = false);
  m.def("add", [](T a, T b) { return PyTensor{ops::add(a.tensor, b.tensor)}; });
  m.def("mul", [](T a, T b) { return PyTensor{ops::mul(a.tensor, b.tensor)}; });
  unary(m, "relu", [](const ir::Tensor& x) { return ops::relu(x); });
  unary(m, "gelu", [](const ir::Tensor& x) { return ops::gelu(x); });
  unary(m, "tanh", [](const ir::Tensor& x) { return ops::tanh(x); });
  unary(m, "exp", [](const ir::Tensor& x) { return ops::exp(x); });
  unary(m, "sigmoid", [](const ir::Tensor& x) { return ops::sigmoid(x); });
  m.def(
      "transpose", [](T x, std::vector<int64_t> perm) { return PyTensor{ops::transpose(x.tensor, perm)}; },
      py::arg("x"), py::arg("perm"));
  m.def(
      "reshape",
      [](T x, const py::sequence& shape) { return PyTensor{ops::reshape(x.tensor, to_shape(shape))}; },
      py::arg("x"), py::arg("shape"));
}

}  // namespace tessera::python
