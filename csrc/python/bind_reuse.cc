// ETO's reuse analysis from Python (tune/reuse/): which operators can reuse which, with and
// without one-hop bridges, and the reuse pair selection with its trial estimates. The tuning
// itself runs through tune_tasks(reuse=True) (bind_search.cc).
#include <pybind11/stl.h>

#include "python/bindings.h"
#include "tune/reuse/reuse_condition.h"
#include "tune/reuse/selector.h"
#include "util/check.h"

namespace py = pybind11;

namespace tessera::python {

namespace {

using OperatorTuple = std::tuple<std::vector<PyTensor>, std::vector<PyTensor>, std::string>;

std::vector<tune::reuse::ReuseOperator> describe_all(const std::vector<OperatorTuple>& ops) {
  std::vector<tune::reuse::ReuseOperator> out;
  for (const auto& [outputs, inputs, name] : ops) {
    out.push_back(tune::reuse::describe_operator(unwrap(outputs), unwrap(inputs), name));
  }
  return out;
}

py::dict selection_dict(const tune::reuse::ReuseSelection& sel) {
  py::list steps;
  for (const tune::reuse::TuningStep& st : sel.steps) {
    py::dict d;
    d["name"] = st.name;
    d["extents"] = st.extents;
    d["bridge"] = st.bridge;
    d["source"] = st.source;
    d["trials"] = st.trials;
    steps.append(d);
  }
  py::dict d;
  d["steps"] = steps;
  d["step_of_operator"] = sel.step_of_operator;
  d["total_trials"] = sel.total_trials;
  d["full_searches"] = sel.full_searches;
  d["text"] = sel.describe();
  return d;
}

}  // namespace

void bind_reuse(py::module_& m) {
  m.def(
      "reuse_pairs",
      [](const std::vector<OperatorTuple>& ops, bool bridges) {
        std::vector<tune::reuse::ReuseOperator> all = describe_all(ops);
        const size_t n_ops = all.size();
        if (bridges) {
          for (tune::reuse::ReuseOperator& b : tune::reuse::one_hop_bridges(all)) {
            all.push_back(std::move(b));
          }
        }
        py::list pairs;
        for (const auto& [user, source] : tune::reuse::reuse_pairs(all)) {
          pairs.append(py::make_tuple(all[static_cast<size_t>(user)].name,
                                      all[static_cast<size_t>(source)].name));
        }
        py::list added;
        for (size_t i = n_ops; i < all.size(); ++i) {
          added.append(py::make_tuple(all[i].name, all[i].extents));
        }
        py::dict d;
        d["pairs"] = pairs;
        d["bridges"] = added;
        return d;
      },
      py::arg("operators"), py::arg("bridges") = false,
      "ETO's directed reuse pairs (user, source) among `operators` ((outputs, inputs, name) "
      "each), and with bridges=True also among their one-hop bridges. Returns {pairs, bridges: "
      "[(name, extents)]}.");
  m.def(
      "reuse_selection",
      [](const std::vector<OperatorTuple>& ops, const std::string& method,
         double full_search_trials, int k) {
        const std::vector<tune::reuse::ReuseOperator> all = describe_all(ops);
        tune::reuse::TrialEstimateParams params;
        if (full_search_trials > 0) params.full_search_trials = full_search_trials;
        if (method == "topk") return selection_dict(tune::reuse::select_top_k(all, k, params));
        return selection_dict(tune::reuse::select_reuse(
            all, tune::reuse::selection_method_from_name(method), params));
      },
      py::arg("operators"), py::arg("method") = "greedy", py::arg("full_search_trials") = 0.0,
      py::arg("k") = tune::reuse::kTopKPrograms,
      "ETO's reuse pair selection over `operators` ((outputs, inputs, name) each): method "
      "'arborescence' (no bridges), 'greedy' or 'exact' (one-hop bridges, Steiner tree), or "
      "'topk' (Selective Tuning's baseline, k programs); full_search_trials: a full search's "
      "cost (0: the policy's). Returns {steps: [{name, extents, bridge, source, trials}], "
      "step_of_operator, total_trials, full_searches, text}.");
}

}  // namespace tessera::python
