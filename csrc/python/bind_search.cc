// Search mode's entries beyond the compile call: a whole model's kernels tuned together under
// the task scheduler (the backend's max-autotune), one task's search with its ablation settings,
// and the learned model's held-out ranking quality (benchmarks/search.py).
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "compiler/search_session.h"
#include "compiler/tune_tasks.h"
#include "cost/features.h"
#include "python/bindings.h"
#include "python/runner_arg.h"
#include "python/trial_callback.h"
#include "tune/search/model_eval.h"
#include "tune/search/space.h"
#include "util/check.h"

namespace py = pybind11;

namespace tessera::python {

namespace {

// (outputs, inputs, name, weight, constant input positions)
using TaskTuple =
    std::tuple<std::vector<PyTensor>, std::vector<PyTensor>, std::string, double, std::vector<int>>;

tune::search::Allocation allocation_from_name(const std::string& name) {
  TESSERA_CHECK(name == "gradient" || name == "round-robin")
      << "scheduler must be 'gradient' or 'round-robin', got '" << name << "'";
  return name == "gradient" ? tune::search::Allocation::kGradient
                            : tune::search::Allocation::kRoundRobin;
}

py::dict tune_tasks_result(const compiler::TuneTasksResult& r) {
  py::list tasks;
  for (const compiler::TaskOutcome& o : r.tasks) {
    py::dict d;
    d["name"] = o.name;
    d["weight"] = o.weight;
    d["status"] = o.status;
    d["schedule"] = o.schedule;
    d["report"] = o.report;
    d["rounds"] = o.rounds;
    d["reused_from"] = o.reused_from;
    d["bridge"] = o.bridge;
    d["reused_from_name"] = o.reused_from_name;
    tasks.append(d);
  }
  py::dict d;
  d["tasks"] = tasks;
  d["order"] = r.order;
  d["trials_after"] = r.trials_after;
  d["objective"] = r.objective;
  d["round_trials"] = r.round_trials;
  d["reuse_trials"] = r.reuse_trials;
  d["tune_s"] = r.tune_s;
  return d;
}

py::dict search_stats(const tune::search::SearchStats& st) {
  py::dict d;
  d["total_s"] = st.total_s;
  d["measure_s"] = st.measure_s;
  d["overhead_s"] = st.overhead_s();
  d["sample_s"] = st.sample_s;
  d["lower_s"] = st.lower_s;
  d["feature_s"] = st.feature_s;
  d["predict_s"] = st.predict_s;
  d["evolve_s"] = st.evolve_s;
  d["train_s"] = st.train_s;
  d["analytic_rounds"] = st.analytic_rounds;
  d["model_rounds"] = st.model_rounds;
  return d;
}

void bind_tune_tasks(py::module_& m) {
  m.def(
      "tune_tasks",
      [](const std::vector<TaskTuple>& tasks, int trials, int trials_per_task,
         const std::string& scheduler, uint64_t seed, db::RecordsDB* records,
         const std::string& threads, bool fresh_model, py::object on_trial,
         const py::object& runner, bool reuse) {
        std::vector<compiler::TaskSpec> specs;
        for (const TaskTuple& t : tasks) {
          compiler::TaskSpec s;
          s.outputs = unwrap(std::get<0>(t));
          s.inputs = unwrap(std::get<1>(t));
          s.name = std::get<2>(t);
          s.weight = std::get<3>(t);
          s.constant_inputs = std::get<4>(t);
          specs.push_back(std::move(s));
        }
        compiler::TuneTasksRequest req;
        req.trials = trials;
        req.trials_per_task = trials_per_task;
        req.strategy = allocation_from_name(scheduler);
        req.seed = seed;
        req.records = records;
        req.threads = compiler::threads_from_name(threads);
        req.fresh_model = fresh_model;
        req.on_trial = trial_callback(std::move(on_trial));
        req.runner = runner_from_arg(runner);
        req.reuse = reuse;
        compiler::TuneTasksResult r;
        {
          py::gil_scoped_release release;
          r = compiler::tune_tasks(specs, req);
        }
        return tune_tasks_result(r);
      },
      py::arg("tasks"), py::arg("trials") = 0, py::arg("trials_per_task") = 0,
      py::arg("scheduler") = "gradient", py::arg("seed") = 0, py::arg("records") = nullptr,
      py::arg("threads") = "auto", py::arg("fresh_model") = false, py::arg("on_trial") = py::none(),
      py::arg("runner") = py::none(), py::arg("reuse") = false,
      "Search mode over many kernels under the task scheduler (compiler/tune_tasks.h). `tasks`: "
      "(outputs, inputs, name, weight, constant input positions) per kernel; `trials`: "
      "measurements over all of them (0: `trials_per_task` per kernel searched, 0: the "
      "policy's); `reuse`: ETO's program reuse (kernels the reuse selection does not root are "
      "tuned from another kernel's choice). Returns {tasks: [{name, weight, status, schedule, "
      "report, rounds, reused_from, reused_from_name, bridge}] (bridge operators after the given "
      "tasks), order, "
      "trials_after, objective, round_trials, "
      "reuse_trials, tune_s}; choices go to `records` when given.");
}

void bind_search_task(py::module_& m) {
  m.def(
      "search_task",
      [](const std::vector<PyTensor>& outputs, const std::vector<PyTensor>& inputs, int trials,
         uint64_t seed, const std::string& model, bool retrain, bool construct_seeds,
         bool fresh_model, const std::string& threads, const std::string& name,
         py::object on_trial) {
        tune::Task task = tune::Task::create(unwrap(outputs), unwrap(inputs), name);
        task.parallel = compiler::runs_in_parallel(task.plan, compiler::threads_from_name(threads));
        compiler::SearchSettings s;
        s.name = name;
        s.trials = trials;
        s.seed = seed;
        s.model = model;
        s.retrain = retrain;
        s.construct_seeds = construct_seeds;
        s.fresh_model = fresh_model;
        s.on_trial = trial_callback(std::move(on_trial));
        compiler::CompileReport report;
        report.name = name;
        compiler::Tuned chosen;
        tune::search::SearchStats stats;
        py::list trials_out;
        {
          py::gil_scoped_release release;
          compiler::SearchSession session(task, std::move(s), &report);
          while (session.round() > 0) {
          }
          chosen = session.finish();
          stats = session.result().stats;
          py::gil_scoped_acquire gil;
          for (const tune::search::Trial& t : session.result().trials) {
            py::dict d;
            d["round"] = t.round;
            d["picked_by"] = t.picked_by;
            d["ok"] = t.result.ok;
            d["median_ms"] = t.result.ok ? t.result.median_ms : -1.0;
            d["schedule"] = t.schedule;
            trials_out.append(d);
          }
        }
        py::dict d;
        d["schedule"] = chosen.schedule;
        d["report"] = report;
        d["trials"] = trials_out;
        d["stats"] = search_stats(stats);
        return d;
      },
      py::arg("outputs"), py::arg("inputs"), py::arg("trials") = 0, py::arg("seed") = 0,
      py::arg("model") = "xgboost", py::arg("retrain") = true, py::arg("construct_seeds") = true,
      py::arg("fresh_model") = true, py::arg("threads") = "parallel", py::arg("name") = "search",
      py::arg("on_trial") = py::none(),
      "One task's search with the ablation settings (compiler/search_session.h): model "
      "'xgboost' | 'random', retrain, construct_seeds, fresh_model (an empty model of its own). "
      "Returns {schedule, report, trials: [{round, picked_by, ok, median_ms, schedule}], stats}.");
}

void bind_heldout_spearman(py::module_& m) {
  using Measured = std::tuple<std::vector<PyTensor>, std::vector<PyTensor>,
                              std::vector<schedule::KernelSchedule>, std::vector<double>>;
  m.def(
      "heldout_spearman",
      [](const std::vector<Measured>& tasks) {
        std::vector<tune::search::MeasuredPrograms> data;
        {
          py::gil_scoped_release release;
          for (size_t i = 0; i < tasks.size(); ++i) {
            const auto& [outs, ins, schedules, times] = tasks[i];
            TESSERA_CHECK(schedules.size() == times.size())
                << "task " << i << ": " << schedules.size() << " schedules, " << times.size()
                << " times";
            tune::Task task =
                tune::Task::create(unwrap(outs), unwrap(ins), "t" + std::to_string(i));
            tune::search::SearchSpace space(task);
            tune::search::MeasuredPrograms mp;
            mp.task = task.name;
            for (size_t p = 0; p < schedules.size(); ++p) {
              std::optional<loop::LoweredFunc> f = space.try_lower(schedules[p]);
              if (!f) continue;
              mp.programs.push_back(cost::extract_features(*f));
              mp.throughputs.push_back(times[p] > 0 ? 1.0 / times[p] : 0.0);
            }
            data.push_back(std::move(mp));
          }
        }
        return tune::search::heldout_spearman(data);
      },
      py::arg("tasks"),
      "Leave-one-task-out ranking quality of the XGBoost cost model: `tasks` = (outputs, inputs, "
      "schedules, median_ms (<= 0: failed)) per task; per task, Spearman's rho between the "
      "scores of a model fitted on the other tasks and the measured throughputs.");
}

}  // namespace

void bind_search(py::module_& m) {
  m.def("reset_search_model", &compiler::reset_shared_search_model,
        "Forgets what this process's search cost model learned (benchmarks compare strategies "
        "from the same empty model).");
  bind_tune_tasks(m);
  bind_search_task(m);
  bind_heldout_spearman(m);
}

}  // namespace tessera::python
