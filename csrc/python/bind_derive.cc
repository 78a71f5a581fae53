// EinNet derivation from Python (derive/): expressions in EinNet's form (implicit zero padding)
// and the derivation pipeline of one expression, with its search statistics.
#include <pybind11/stl.h>

#include "derive/derive_kernel.h"
#include "derive/expressions.h"
#include "derive/implicit_padding.h"
#include "derive/search.h"
#include "python/bindings.h"

namespace py = pybind11;

namespace tessera::python {

void bind_derive(py::module_& m) {
  py::module_ e = m.def_submodule(
      "derive_expr", "Expressions in EinNet's form: reads outside a shape give 0 (derive/).");
  e.def(
      "conv2d",
      [](const PyTensor& x, const PyTensor& k, int64_t stride, int64_t pad, int64_t dilation) {
        return PyTensor{derive::conv2d_expr(x.tensor, k.tensor, stride, pad, dilation)};
      },
      py::arg("x"), py::arg("k"), py::arg("stride") = 1, py::arg("pad") = 0,
      py::arg("dilation") = 1);
  e.def(
      "conv_transpose2d",
      [](const PyTensor& x, const PyTensor& k, int64_t stride, int64_t pad) {
        return PyTensor{derive::conv_transpose2d_expr(x.tensor, k.tensor, stride, pad)};
      },
      py::arg("x"), py::arg("k"), py::arg("stride") = 1, py::arg("pad") = 0);
  e.def(
      "g2bmm",
      [](const PyTensor& a, const PyTensor& b, int64_t half, int64_t dilation, bool b_k_major) {
        return PyTensor{derive::g2bmm_expr(a.tensor, b.tensor, half, dilation, b_k_major)};
      },
      py::arg("a"), py::arg("b"), py::arg("half"), py::arg("dilation") = 1,
      py::arg("b_k_major") = false);
  m.def(
      "derive_search",
      [](const std::vector<PyTensor>& outputs, int depth, bool fingerprints, double time_limit_s,
         size_t max_states, const std::vector<PyTensor>& weights) {
        derive::DeriveContext ctx;
        for (const PyTensor& w : weights) ctx.weights.insert(w.tensor.get());
        derive::SearchConfig cfg;
        cfg.explorative_depth = depth;
        cfg.use_fingerprints = fingerprints;
        cfg.time_limit_s = time_limit_s;
        cfg.max_states = max_states;
        derive::SearchResult r;
        {
          py::gil_scoped_release release;
          r = derive::optimize_program(derive::implicit_padding(derive::State{unwrap(outputs), {}}),
                                       ctx, cfg);
        }
        py::dict d;
        d["derivations"] = r.derivations.size();
        d["states"] = r.stats.explored;
        d["generated"] = r.stats.generated;
        d["pruned"] = r.stats.pruned;
        d["converged"] = r.stats.converged;
        d["explorative_kept"] = r.stats.explorative_kept;
        d["explorative_paths"] = r.stats.explorative_paths;
        d["budget_hit"] = r.stats.budget_hit;
        d["search_s"] = r.stats.seconds;
        return d;
      },
      py::arg("outputs"), py::arg("depth") = 2, py::arg("fingerprints") = true,
      py::arg("time_limit_s") = 60.0, py::arg("max_states") = 200000,
      py::arg("weights") = std::vector<PyTensor>{},
      "EinNet's search alone (Algorithm 1 over `outputs` in EinNet form, read guards dropped "
      "as _C.derive drops them), without choice or "
      "measurement: the counts of states kept, successors generated and pruned, derivations "
      "found. With fingerprints=False every successor is kept: the ablation of EinNet's "
      "Figure 19 (budget_hit: the count is a lower bound).");
  m.def(
      "derive",
      [](const std::vector<PyTensor>& outputs, const std::vector<PyTensor>& inputs, int depth,
         double time_limit_s, const std::vector<int>& weights, const std::string& tune) {
        derive::DeriveOptions o;
        o.tune = compiler::tune_mode_from_name(tune);
        o.depth = depth;
        o.time_limit_s = time_limit_s;
        o.weights = weights;
        derive::DeriveReport r;
        {
          py::gil_scoped_release release;
          r = derive::derive_kernel(unwrap(outputs), unwrap(inputs), o);
        }
        py::list outs, original;
        for (const ir::Tensor& t : r.outputs) outs.append(PyTensor{t});
        for (const ir::Tensor& t : r.original) original.append(PyTensor{t});
        py::dict d;
        d["found"] = r.found;
        d["outputs"] = outs;
        d["original"] = original;
        d["rules"] = r.rules;
        d["depth"] = static_cast<int>(r.rules.size());
        d["program"] = r.program;
        d["derivations"] = r.derivations;
        d["states"] = r.states;
        d["generated"] = r.generated;
        d["pruned"] = r.pruned;
        d["pruned_share"] = r.generated ? static_cast<double>(r.pruned) / r.generated : 0.0;
        d["explorative_pruned_share"] = r.pruned_share;
        d["search_s"] = r.search_s;
        d["original_ms"] = r.original_ms;
        d["derived_ms"] = r.derived_ms;
        d["rel_error"] = r.rel_error;
        return d;
      },
      py::arg("outputs"), py::arg("inputs"), py::arg("depth") = 2, py::arg("time_limit_s") = 60.0,
      py::arg("weights") = std::vector<int>{}, py::arg("tune") = "construct",
      "EinNet's derivation of `outputs` (EinNet form) over `inputs`: search, choice by "
      "measurement, and a final check that the chosen program's kernel is faster than the "
      "original's, both compiled with `tune` and timed side by side. Returns {found, outputs (the "
      "program to compile: derived, or the original "
      "with explicit padding), original (the original with explicit padding), rules, depth, "
      "program, derivations, states, generated, pruned, "
      "pruned_share (successors dropped as repeats), explorative_pruned_share (states kept against "
      "the rule paths a search without fingerprints visits), search_s, original_ms, derived_ms, "
      "rel_error}.");
}

}  // namespace tessera::python
