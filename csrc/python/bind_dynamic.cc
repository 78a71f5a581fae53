// DietCode from Python: tessera._C.dynamic tunes a workload whose shapes mention size variables
// with ranges into one DynamicKernel (few micro-kernels compiled once, a dispatcher, a fallback),
// for benchmarks/dynamic.py and, later, the torch.compile backend's dynamic shapes.
#include <pybind11/stl.h>

#include <chrono>
#include <optional>

#include "python/bindings.h"
#include "python/kernel_call.h"
#include "schedule/split_reduction.h"
#include "tune/dynamic/tune_dynamic.h"
#include "util/check.h"

namespace py = pybind11;

namespace tessera::python {

namespace {

using tune::dynamic::DynamicTuneResult;

struct PyDynamicKernel {
  std::shared_ptr<const tune::dynamic::DynamicKernel> kernel;
  DynamicTuneResult report;  // its `kernel` member is the same as `kernel`

  void run(const std::vector<uintptr_t>& ptrs, const std::vector<int64_t>& sizes) const {
    std::vector<void*> bufs;
    for (uintptr_t p : ptrs) bufs.push_back(reinterpret_cast<void*>(p));
    py::gil_scoped_release release;  // kernels run on Tessera's own thread pool
    kernel->run(bufs, sizes);
  }

  int dispatch(const std::vector<int64_t>& sizes) const {
    TESSERA_CHECK(sizes.size() == kernel->num_sizes())
        << "dispatch takes " << kernel->num_sizes() << " sizes, got " << sizes.size();
    return kernel->dispatch(sizes.data());
  }

  // Mean ns of one dispatch over `calls` lookups cycling through `sizes` (measured in C++, so
  // that Python's call overhead is not part of it).
  double dispatch_ns(const std::vector<std::vector<int64_t>>& sizes, int64_t calls) const {
    TESSERA_CHECK(!sizes.empty() && calls > 0) << "dispatch_ns needs sizes and calls";
    for (const auto& s : sizes) {
      TESSERA_CHECK(s.size() == kernel->num_sizes()) << "dispatch_ns: wrong number of sizes";
    }
    int64_t sink = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < calls; ++i) {
      sink += kernel->dispatch(sizes[static_cast<size_t>((i + (sink & 1)) % sizes.size())].data());
    }
    const double ns =
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    volatile int64_t keep = sink;  // the lookups must not be optimised away
    (void)keep;
    return ns / static_cast<double>(calls);
  }

  util::Json report_json() const {
    util::Json j = report.selection.to_json();
    j["from_records"] = util::Json(report.from_records);
    j["tune_s"] = util::Json(report.tune_s);
    j["timings"] = util::Json(report.timings);
    j["search_measured"] = util::Json(report.search_measured);  // search mode's, largest instance
    util::Json phases = util::Json::object();
    for (const auto& [name, s] : report.phase_s) phases[name] = util::Json(s);
    j["phase_s"] = phases;
    util::Json cands = util::Json::array();
    for (const auto& c : report.candidates) {
      util::Json cj = util::Json::object();
      cj["origin"] = util::Json(c.origin);
      cj["ok"] = util::Json(c.ok);
      cj["pruned"] = util::Json(c.pruned);
      cj["throughput"] = util::Json(c.model.throughput);
      cj["overhead_ms"] = util::Json(c.model.overhead_ms);
      util::Json knots = util::Json::array();
      for (const auto& [u, ms] : c.model.knots) {
        util::Json knot = util::Json::array();
        knot.push_back(util::Json(u));
        knot.push_back(util::Json(ms));
        knots.push_back(knot);
      }
      cj["knots"] = knots;  // (work x padding x wave, ms) of each timed size
      cj["error"] = util::Json(c.error);
      cj["schedule"] = c.schedule.to_json();
      cands.push_back(cj);
    }
    j["candidate_reports"] = cands;
    return j;
  }
};

}  // namespace

void bind_dynamic(py::module_& m) {
  py::module_ d = m.def_submodule("dynamic", "DietCode: one tuning for a range of sizes");
  d.def(
      "scaled",
      [](const PyExpr& e, int64_t factor) { return PyExpr{ir::int_imm(factor) * e.expr}; },
      py::arg("size"), py::arg("factor"), "factor * size, as a dimension (e.g. 16 * T rows).");
  py::class_<PyDynamicKernel>(d, "DynamicKernel")
      .def("run", &PyDynamicKernel::run, py::arg("ptrs"), py::arg("sizes"),
           "Runs the kernel for these sizes (one per size variable): buffers = inputs then "
           "outputs, as data pointers.")
      .def("dispatch", &PyDynamicKernel::dispatch, py::arg("sizes"),
           "The selected kernel for these sizes, or -1 (the fallback) outside the tuned ranges.")
      .def("dispatch_ns", &PyDynamicKernel::dispatch_ns, py::arg("sizes"),
           py::arg("calls") = 1000000, "Mean ns per dispatch, measured in C++.")
      .def_property_readonly(
          "prepacks",
          [](const PyDynamicKernel& k) {
            std::vector<std::pair<int, int64_t>> out;
            for (const auto& a : k.kernel->packed_constants().arguments()) {
              out.emplace_back(a.input, a.numel);
            }
            return out;
          },
          "(input position, elements of its packed argument) of each constant input some "
          "micro-kernel reads prepacked: pass the argument (made by prepack) in the input's place.")
      .def(
          "prepack",
          [](const PyDynamicKernel& k, int input, uintptr_t src, uintptr_t dst) {
            py::gil_scoped_release release;
            k.kernel->packed_constants().pack(input, reinterpret_cast<const void*>(src),
                                              reinterpret_cast<void*>(dst));
          },
          py::arg("input"), py::arg("src"), py::arg("dst"),
          "Writes the packed argument of input `input` (data pointer `src`) to `dst`, which holds "
          "the element count prepacks gives and is 64-byte aligned.")
      .def(
          "runner",
          [](const PyDynamicKernel& k, const KernelRunner& shapes) {
            KernelRunner r;
            r.run = [kernel = k.kernel](const std::vector<void*>& buffers,
                                        const std::vector<int64_t>& sizes) {
              kernel->run(buffers, sizes);
            };
            r.output_shapes = shapes.output_shapes;
            return r;
          },
          py::arg("shapes"),
          "The kernel's checked run, with the output shapes of `shapes` (the runner of a kernel "
          "of the same DAG), for _C.KernelCall.")
      .def_property_readonly("num_kernels",
                             [](const PyDynamicKernel& k) { return k.kernel->num_kernels(); })
      .def_property_readonly("from_records",
                             [](const PyDynamicKernel& k) { return k.report.from_records; })
      .def_property_readonly("tune_s", [](const PyDynamicKernel& k) { return k.report.tune_s; })
      .def_property_readonly(
          "report", [](const PyDynamicKernel& k) { return k.report_json().dump(); },
          "The selection and the candidates as JSON text.");
  d.def(
      "tune",
      [](const std::vector<PyTensor>& outputs, const std::vector<PyTensor>& inputs,
         const std::string& name, db::RecordsDB* records, int64_t max_points, int representatives,
         uint64_t seed, std::optional<int> top_k, std::optional<int> mutate_top,
         std::optional<int> serial_variants, const std::vector<int>& constant_inputs,
         const std::vector<schedule::KernelSchedule>& candidates, int search_trials) {
        tune::dynamic::DynamicTuneOptions opts;
        opts.candidates = candidates;
        opts.search_trials = search_trials;
        opts.records = records;
        opts.max_points = max_points;
        opts.representatives = representatives;
        opts.construct.seed = seed;
        if (top_k) opts.construct.top_k = *top_k;
        if (mutate_top) opts.mutate_top = *mutate_top;
        if (serial_variants) opts.serial_variants = *serial_variants;
        PyDynamicKernel k;
        {
          py::gil_scoped_release release;  // measured kernels run on Tessera's thread pool
          const auto w = tune::dynamic::DynamicWorkload::create(unwrap(outputs), unwrap(inputs),
                                                                name, constant_inputs);
          k.report = tune::dynamic::tune_dynamic(w, opts);
        }
        k.kernel = k.report.kernel;
        return k;
      },
      py::arg("outputs"), py::arg("inputs"), py::arg("name") = "dynamic",
      py::arg("records") = nullptr, py::arg("max_points") = 256, py::arg("representatives") = 2,
      py::arg("seed") = 0, py::arg("top_k") = py::none(), py::arg("mutate_top") = py::none(),
      py::arg("serial_variants") = py::none(), py::arg("constant_inputs") = std::vector<int>{},
      py::arg("candidates") = std::vector<schedule::KernelSchedule>{}, py::arg("search_trials") = 0,
      "DietCode tuning of the kernel outputs <- inputs over the ranges of its size variables. "
      "top_k, mutate_top, serial_variants: construct mode's candidates per representative, "
      "how many of them get tile mutations, how many also run serially (None: the defaults). "
      "constant_inputs: positions of inputs that stay the same between calls (weights): the "
      "kernel reads those it packs from the packed arguments named by its prepacks.");
}

}  // namespace tessera::python
