// ALT from Python (layout/): layouts and their maps, relaying a DAG, the templates' candidates
// and the joint layout + loop tuner (benchmarks/layout.py, tessera.explain).
#include <pybind11/stl.h>

#include "layout/layout_tuner.h"
#include "layout/propagate.h"
#include "python/bindings.h"
#include "schedule/default_schedule.h"

namespace py = pybind11;

namespace tessera::python {

namespace {

using layout::Layout;
using layout::LayoutCandidate;
using layout::LayoutMap;
using TextMap = std::map<std::string, std::string>;

TextMap texts_of(const LayoutMap& m) {
  TextMap out;
  for (const auto& [name, l] : m) out[name] = l.to_string();
  return out;
}

std::vector<PyTensor> wrap(const std::vector<ir::Tensor>& ts) {
  std::vector<PyTensor> out;
  for (const ir::Tensor& t : ts) out.push_back(PyTensor{t});
  return out;
}

py::dict result_dict(const layout::LayoutTuneResult& r) {
  py::list trials;
  for (const layout::LayoutTrial& t : r.trials) {
    py::dict d;
    d["name"] = t.candidate.name;
    d["best_ms"] = t.best_ms;
    d["measured"] = t.measured;
    d["error"] = t.error;
    trials.append(d);
  }
  py::dict d;
  d["chosen"] = r.chosen.name;
  d["layouts"] = r.schedule.layouts;
  d["schedule"] = r.schedule;
  d["best_ms"] = r.best_ms;
  d["trials"] = trials;
  py::list race;  // (layout, race time over the incumbent's), the incumbent first
  for (const layout::LayoutRaceEntry& e : r.race) race.append(py::make_tuple(e.candidate, e.ratio));
  d["race"] = race;
  d["layout_stage_measured"] = r.layout_stage_measured;
  d["loop_stage_measured"] = r.loop_stage_measured;
  d["from_records"] = r.from_records;
  d["outputs"] = wrap(r.relaid.outputs);
  d["inputs"] = wrap(r.relaid.inputs);
  return d;
}

layout::LayoutTuneOptions tune_options(int budget, int per_layout, uint64_t seed,
                                       const std::vector<std::string>& weights,
                                       db::RecordsDB* records) {
  layout::LayoutTuneOptions o;
  o.budget = budget;
  o.per_layout = per_layout;
  o.seed = seed;
  o.constant_inputs = weights;
  o.records = records;
  return o;
}

}  // namespace

void bind_layout(py::module_& m) {
  py::module_ l = m.def_submodule("layout", "ALT: tensor layouts, relaying, joint tuning");
  py::class_<Layout>(l, "Layout", "A layout: primitives over a tensor's logical dims.")
      .def(py::init(&Layout::parse), py::arg("shape"), py::arg("text"))
      .def_property_readonly("logical_shape", &Layout::logical_shape)
      .def_property_readonly("physical_shape", &Layout::physical_shape)
      .def_property_readonly("expansion", &Layout::expansion)
      .def_property_readonly("is_dense", &Layout::is_dense)
      .def("__str__", &Layout::to_string)
      .def("__repr__", [](const Layout& x) { return "<Layout " + x.to_string() + ">"; });
  l.def(
      "apply",
      [](const std::vector<PyTensor>& outputs, const std::vector<PyTensor>& inputs,
         const TextMap& layouts, bool propagate, const std::set<std::string>& relayable) {
        const std::vector<ir::Tensor> outs = unwrap(outputs), ins = unwrap(inputs);
        LayoutMap m = layout::parse_layouts(outs, ins, layouts);
        if (propagate) m = layout::propagate_layouts(outs, m, relayable);
        const layout::Relaid r = layout::apply_layouts(outs, ins, m);
        return py::make_tuple(wrap(r.outputs), wrap(r.inputs), texts_of(m));
      },
      py::arg("outputs"), py::arg("inputs"), py::arg("layouts"), py::arg("propagate") = true,
      py::arg("relayable") = std::set<std::string>{},
      "The DAG relaid: (outputs, inputs, layouts applied incl. propagated ones). `relayable`: "
      "input names the caller can pass in a layout propagation picks (weights).");
  l.def(
      "uniquely_named",
      [](const std::vector<PyTensor>& outputs, const std::vector<PyTensor>& inputs) {
        const layout::Relaid r = layout::uniquely_named(unwrap(outputs), unwrap(inputs));
        return py::make_tuple(wrap(r.outputs), wrap(r.inputs));
      },
      py::arg("outputs"), py::arg("inputs"),
      "The DAG with every compute named once (later namesakes get _1, _2, ...): (outputs, "
      "inputs). Layouts are given by name, so apply them to a uniquely named DAG.");
  l.def(
      "anchor_kind",
      [](const std::vector<PyTensor>& outputs) {
        return std::string(layout::anchor_kind_name(layout::anchor_kind(unwrap(outputs))));
      },
      py::arg("outputs"));
  l.def(
      "candidates",
      [](const std::vector<PyTensor>& outputs, int vector_lanes) {
        if (vector_lanes <= 0) vector_lanes = schedule::Target::host().vector_lanes;
        std::vector<std::pair<std::string, TextMap>> out;
        for (const LayoutCandidate& c : layout::layout_candidates(unwrap(outputs), vector_lanes)) {
          out.emplace_back(c.name, texts_of(c.layouts));
        }
        return out;
      },
      py::arg("outputs"), py::arg("vector_lanes") = 0,
      "The templates' candidates: [(name, {tensor: layout text})], 'fixed' first.");
  l.def(
      "tune",
      [](const std::vector<PyTensor>& outputs, const std::vector<PyTensor>& inputs,
         std::optional<std::vector<std::pair<std::string, TextMap>>> candidates, int budget,
         int per_layout, uint64_t seed, const std::vector<std::string>& weights,
         db::RecordsDB* records) {
        const std::vector<ir::Tensor> outs = unwrap(outputs), ins = unwrap(inputs);
        std::vector<LayoutCandidate> cands;
        if (candidates) {
          for (const auto& [name, texts] : *candidates) {
            cands.push_back({name, layout::parse_layouts(outs, ins, texts)});
          }
        } else {
          cands = layout::layout_candidates(outs, schedule::Target::host().vector_lanes);
        }
        py::gil_scoped_release release;
        const layout::LayoutTuneResult r = layout::tune_layouts(
            outs, ins, cands, tune_options(budget, per_layout, seed, weights, records));
        py::gil_scoped_acquire acquire;
        return result_dict(r);
      },
      py::arg("outputs"), py::arg("inputs"), py::arg("candidates") = std::nullopt,
      py::arg("budget") = 16, py::arg("per_layout") = 3, py::arg("seed") = 0,
      py::arg("weights") = std::vector<std::string>{}, py::arg("records") = nullptr,
      "Joint layout + loop tuning (layout_tuner.h); candidates default to the templates'.");
  l.def(
      "tune_loops",
      [](const std::vector<PyTensor>& outputs, const std::vector<PyTensor>& inputs,
         const std::string& name, const TextMap& layouts, int budget, uint64_t seed,
         const std::vector<std::string>& weights) {
        const std::vector<ir::Tensor> outs = unwrap(outputs), ins = unwrap(inputs);
        const LayoutCandidate c{name, layout::parse_layouts(outs, ins, layouts)};
        py::gil_scoped_release release;
        const layout::LayoutTuneResult r =
            layout::tune_loops_only(outs, ins, c, tune_options(budget, 0, seed, weights, nullptr));
        py::gil_scoped_acquire acquire;
        return result_dict(r);
      },
      py::arg("outputs"), py::arg("inputs"), py::arg("name") = "fixed",
      py::arg("layouts") = TextMap{}, py::arg("budget") = 16, py::arg("seed") = 0,
      py::arg("weights") = std::vector<std::string>{},
      "Loops only in the given layouts (the fixed-layout baseline at a budget).");
}

}  // namespace tessera::python
