// Construct mode from Python: _C.construct(outputs, inputs, ...) runs Gensor (or the Roller
// baseline) on the kernel computing `outputs` from `inputs` and returns the chosen schedule with
// its predicted and measured times (the ablation and research entry; compiling goes through
// _C.compile).
#include <pybind11/stl.h>

#include "cost/memory_levels.h"
#include "python/bindings.h"
#include "tune/gensor/construct.h"
#include "util/check.h"

namespace py = pybind11;

namespace tessera::python {

void bind_tune(py::module_& m);

void bind_tune(py::module_& m) {
  m.def(
      "construct",
      [](const std::vector<PyTensor>& outputs, const std::vector<PyTensor>& inputs,
         const std::string& mode, uint64_t seed, int top_k, bool predict_only,
         const std::string& eq1, bool interleave, int iterations, int chains,
         bool include_default) {
        const std::vector<ir::Tensor> outs = unwrap(outputs), ins = unwrap(inputs);
        tune::gensor::ConstructOptions opts;
        opts.mode = tune::gensor::construct_mode_from_name(mode);
        opts.seed = seed;
        opts.top_k = top_k;
        opts.predict_only = predict_only;
        opts.eq1 = tune::gensor::eq1_from_name(eq1);
        opts.interleave = interleave;
        opts.include_default = include_default;
        opts.iterations = iterations;
        opts.chains = chains;
        tune::gensor::ConstructResult r;
        {
          py::gil_scoped_release release;  // measured kernels run on Tessera's thread pool
          tune::Task task = tune::Task::create(outs, ins, "construct");
          r = tune::gensor::construct(task, opts);
        }
        py::dict d;
        d["schedule"] = r.schedule;
        d["construct_s"] = r.construct_s;
        d["search_s"] = r.search_s;
        d["measure_s"] = r.measure_s;
        d["predicted"] = r.predicted_ms();
        d["measured"] = r.measured_ms();
        d["chosen"] = r.chosen;
        d["fell_back_to_default"] = r.fell_back_to_default;
        std::vector<schedule::KernelSchedule> cands;
        for (const auto& c : r.candidates) cands.push_back(c.schedule);
        d["candidates"] = cands;
        d["metadata"] = r.to_json().dump();
        return d;
      },
      py::arg("outputs"), py::arg("inputs"), py::arg("mode") = "gensor", py::arg("seed") = 0,
      py::arg("top_k") = 8, py::arg("predict_only") = false, py::arg("eq1") = "printed",
      py::arg("interleave") = true, py::arg("iterations") = 80, py::arg("chains") = 32,
      py::arg("include_default") = true,
      "Construct mode (Gensor, or the Roller baseline) for the kernel of `outputs`, alone (the "
      "compile call runs it with the tuning policy's settings): returns {schedule "
      "(KernelSchedule), construct_s, search_s, measure_s, predicted (ms, top-k in rank order), "
      "measured (ms, -1 = not measured or rejected), chosen, candidates, metadata}.");
  m.def(
      "predict_schedule",
      [](const std::vector<PyTensor>& outputs, const std::vector<PyTensor>& inputs,
         const schedule::KernelSchedule& ks) {
        const std::vector<ir::Tensor> outs = unwrap(outputs), ins = unwrap(inputs);
        tune::Task task = tune::Task::create(outs, ins, "predict");
        const schedule::StagePlan& plan = task.plan_for(ks.plan);
        TESSERA_CHECK(ks.stages.size() == plan.stages.size())
            << "schedule has " << ks.stages.size() << " stages, the kernel " << plan.stages.size();
        tune::gensor::ModelOptions mo;
        mo.cores = task.target.num_threads;
        tune::gensor::AnalyticModel model(cost::host_memory_hierarchy(), mo);
        py::list stages;
        for (size_t i = 0; i < ks.stages.size(); ++i) {
          tune::gensor::StageSpace sp =
              tune::gensor::make_stage_space(plan, static_cast<int>(i), task.target);
          tune::gensor::Prediction p = model.predict(sp, ks.stages[i]);
          py::dict d;
          d["total_ms"] = p.total_ms;
          d["compute_ms"] = p.compute_ms;
          d["l2_ms"] = p.l2_ms;
          d["dram_ms"] = p.dram_ms;
          d["overhead_ms"] = p.overhead_ms;
          d["tasks"] = p.tasks;
          d["parallel_efficiency"] = p.parallel_efficiency;
          stages.append(d);
        }
        return stages;
      },
      py::arg("outputs"), py::arg("inputs"), py::arg("schedule"),
      "The construct-mode time model's estimate for a given schedule, per stage (ms).");
  m.def(
      "memory_hierarchy",
      [](bool refresh) {
        return cost::memory_hierarchy_to_json(cost::host_memory_hierarchy(refresh)).dump();
      },
      py::arg("refresh") = false,
      "Per-level capacities, bandwidths and latencies the analytic models use (JSON; probed once, "
      "cached on disk).");
}

}  // namespace tessera::python
