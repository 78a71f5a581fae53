// Search mode's entries beyond the compile call: a whole model's kernels tuned together under
// the task scheduler (the backend's max-autotune), one task's search with its ablation settings,
// and the learned model's held-out ranking quality and inputs (benchmarks/search.py,
// benchmarks/cost_data.py).
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <optional>

#include "compiler/search_session.h"
#include "compiler/tune_tasks.h"
#include "cost/features.h"
#include "cost/memory_levels.h"
#include "python/bindings.h"
#include "python/runner_arg.h"
#include "python/trial_callback.h"
#include "tune/search/analytic_estimate.h"
#include "tune/search/model_eval.h"
#include "tune/search/program_features.h"
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
         const py::object& runner, bool reuse, const std::string& reuse_selection,
         const std::string& scope) {
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
        req.reuse_selection = tune::reuse::selection_method_from_name(reuse_selection);
        req.scope = compiler::tune_scope_from_name(scope);
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
      py::arg("reuse_selection") = "greedy", py::arg("scope") = "automatic",
      "Search mode over many kernels under the task scheduler (compiler/tune_tasks.h). `tasks`: "
      "(outputs, inputs, name, weight, constant input positions) per kernel; `trials`: "
      "measurements over all of them (0: `trials_per_task` per kernel searched, 0: the "
      "policy's); `reuse`: ETO's program reuse (kernels the reuse selection does not root are "
      "tuned from another kernel's choice); `reuse_selection`: 'greedy' (ETO: Steiner tree with "
      "one-hop bridges), 'exact' (the same, exact), 'arborescence' (no bridges) or 'topk' "
      "(Selective Tuning: reused kernels try their group's 3 best programs); `scope`: 'automatic' "
      "(kernels worth tuning, the tasks together as their graph) or 'every'. Returns {tasks: "
      "[{name, weight, status, schedule, "
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
         bool fresh_model, const std::string& threads, const std::string& name, py::object on_trial,
         const std::vector<int>& checkpoints, const std::vector<int>& constant_inputs,
         int diversity_pool) {
        tune::Task task = tune::Task::create(unwrap(outputs), unwrap(inputs), name);
        task.parallel = compiler::runs_in_parallel(task.plan, compiler::threads_from_name(threads));
        task.constant_inputs = compiler::input_names(unwrap(inputs), constant_inputs);
        compiler::SearchSettings s;
        s.name = name;
        s.trials = trials;
        s.seed = seed;
        s.model = model;
        s.retrain = retrain;
        s.diversity_pool = diversity_pool;
        s.construct_seeds = construct_seeds;
        s.fresh_model = fresh_model;
        s.on_trial = trial_callback(std::move(on_trial));
        compiler::CompileReport report;
        report.name = name;
        compiler::Tuned chosen;
        tune::search::SearchStats stats;
        py::list trials_out;
        py::dict at_checkpoints;
        {
          py::gil_scoped_release release;
          compiler::SearchSession session(task, std::move(s), &report);
          while (session.round() > 0) {
          }
          // A checkpoint at or past the trials measured is finish()'s choice: not raced twice.
          const size_t measured = report.candidates.size();
          std::vector<std::optional<schedule::KernelSchedule>> within;
          for (int n : checkpoints) {
            const size_t at = static_cast<size_t>(std::max(0, n));
            within.push_back(at < measured ? std::optional(session.choice_within(at))
                                           : std::nullopt);
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
          for (size_t i = 0; i < checkpoints.size(); ++i)
            at_checkpoints[py::int_(checkpoints[i])] = within[i] ? *within[i] : chosen.schedule;
        }
        py::dict d;
        d["schedule"] = chosen.schedule;
        d["checkpoints"] = at_checkpoints;
        d["report"] = report;
        d["trials"] = trials_out;
        d["stats"] = search_stats(stats);
        return d;
      },
      py::arg("outputs"), py::arg("inputs"), py::arg("trials") = 0, py::arg("seed") = 0,
      py::arg("model") = "xgboost", py::arg("retrain") = true, py::arg("construct_seeds") = true,
      py::arg("fresh_model") = true, py::arg("threads") = "parallel", py::arg("name") = "search",
      py::arg("on_trial") = py::none(), py::arg("checkpoints") = std::vector<int>{},
      py::arg("constant_inputs") = std::vector<int>{},
      py::arg("diversity_pool") = tune::search::SearchOptions().diversity_pool,
      "One task's search with the ablation settings (compiler/search_session.h): model "
      "'xgboost' | 'xgboost_no_prior' | 'random', retrain, construct_seeds, fresh_model (an "
      "empty model of its own), diversity_pool (1: the best-ranked picks alone). checkpoints: "
      "trial counts n whose choice is returned too (the schedule the search would choose had it "
      "stopped after n measurements). constant_inputs: "
      "positions of inputs that are weights (candidates read those they pack prepacked, as "
      "CompileRequest.constant_inputs). "
      "Returns {schedule, report, trials: [{round, picked_by, ok, median_ms, schedule}], stats, "
      "checkpoints: {n: schedule}}.");
}

using MeasuredTask = std::tuple<std::vector<PyTensor>, std::vector<PyTensor>,
                                std::vector<schedule::KernelSchedule>, std::vector<double>>;

// Feature rows and throughputs of one task's measured schedules; schedules that do not lower
// are left out (positions in `lowered` say which were kept when given). normalise = false: the
// features with W = 1, as feature version 1 had them (the comparison's baseline).
tune::search::MeasuredPrograms measured_programs(const MeasuredTask& t, size_t i, bool normalise,
                                                 std::vector<bool>* lowered = nullptr) {
  const auto& [outs, ins, schedules, times] = t;
  TESSERA_CHECK(schedules.size() == times.size())
      << "task " << i << ": " << schedules.size() << " schedules, " << times.size() << " times";
  tune::Task task = tune::Task::create(unwrap(outs), unwrap(ins), "t" + std::to_string(i));
  tune::search::SearchSpace space(task);
  tune::search::MeasuredPrograms mp;
  mp.task = task.name;
  const double work = normalise ? std::max(1.0, task.iteration_points()) : 1.0;
  const tune::search::ProgramFeaturizer featurize(task, space, cost::host_memory_hierarchy(), work);
  for (size_t p = 0; p < schedules.size(); ++p) {
    std::optional<loop::LoweredFunc> f = space.try_lower(schedules[p]);
    if (lowered) lowered->push_back(f.has_value());
    if (!f) continue;
    mp.programs.push_back(featurize(space, schedules[p], *f));
    mp.throughputs.push_back(times[p] > 0 ? 1.0 / times[p] : 0.0);
  }
  return mp;
}

// Search mode's XGBoost options with those a caller sets (> 0, a non-empty objective) replaced.
cost::XGBOptions xgb_options(int rounds, int max_depth, double eta, const std::string& objective,
                             double prior_weight) {
  cost::XGBOptions options;
  TESSERA_CHECK(objective.empty() || objective == "rank" || objective == "squared")
      << "objective must be 'rank' or 'squared', got '" << objective << "'";
  if (objective == "squared") options.objective = cost::XGBObjective::kSquared;
  if (rounds > 0) options.rounds = rounds;
  if (max_depth > 0) options.max_depth = max_depth;
  if (eta > 0) options.eta = eta;
  if (prior_weight >= 0) options.prior_weight = prior_weight;
  return options;
}

std::vector<tune::search::MeasuredPrograms> measured_tasks(const std::vector<MeasuredTask>& tasks,
                                                           bool normalise) {
  std::vector<tune::search::MeasuredPrograms> data;
  for (size_t i = 0; i < tasks.size(); ++i) {
    data.push_back(measured_programs(tasks[i], i, normalise));
  }
  return data;
}

void bind_model_eval(py::module_& m) {
  m.def(
      "heldout_spearman",
      [](const std::vector<MeasuredTask>& tasks, int rounds, int max_depth, double eta,
         bool normalise, const std::string& objective, double prior_weight) {
        py::gil_scoped_release release;
        return tune::search::heldout_spearman(
            measured_tasks(tasks, normalise),
            xgb_options(rounds, max_depth, eta, objective, prior_weight));
      },
      py::arg("tasks"), py::arg("rounds") = 0, py::arg("max_depth") = 0, py::arg("eta") = 0.0,
      py::arg("normalise") = true, py::arg("objective") = "", py::arg("prior_weight") = -1.0,
      "Leave-one-task-out ranking quality of the XGBoost cost model: `tasks` = (outputs, inputs, "
      "schedules, median_ms (<= 0: failed)) per task; per task, Spearman's rho between the "
      "scores of a model fitted on the other tasks and the measured throughputs. rounds, "
      "max_depth, eta, objective ('rank' | 'squared'), prior_weight (the analytic prior's "
      "weight, 0: none): XGBOptions (0, '', < 0: search mode's); "
      "normalise = False: features not divided by "
      "the task's work (feature version 1, the baseline).");
  m.def(
      "intask_spearman",
      [](const std::vector<MeasuredTask>& tasks, double train_fraction, int rounds, int max_depth,
         double eta, bool normalise, const std::string& objective, double prior_weight) {
        py::gil_scoped_release release;
        return tune::search::intask_spearman(
            measured_tasks(tasks, normalise), train_fraction,
            xgb_options(rounds, max_depth, eta, objective, prior_weight));
      },
      py::arg("tasks"), py::arg("train_fraction") = 0.5, py::arg("rounds") = 0,
      py::arg("max_depth") = 0, py::arg("eta") = 0.0, py::arg("normalise") = true,
      py::arg("objective") = "", py::arg("prior_weight") = -1.0,
      "In-task ranking quality: per task (as heldout_spearman takes them), rho on its later "
      "programs of a model fitted on its first `train_fraction` (measurement order).");
}

void bind_program_features(py::module_& m) {
  m.def("feature_names", &cost::feature_names,
        "The learned cost model's per-store feature names, one per column (cost/features.h).");
  m.def(
      "program_features",
      [](const std::vector<PyTensor>& outputs, const std::vector<PyTensor>& inputs,
         const std::vector<schedule::KernelSchedule>& schedules) {
        std::vector<bool> lowered;
        tune::search::MeasuredPrograms mp;
        {
          py::gil_scoped_release release;
          const MeasuredTask t{outputs, inputs, schedules,
                               std::vector<double>(schedules.size(), 0.0)};
          mp = measured_programs(t, 0, /*normalise=*/true, &lowered);
        }
        py::list out;
        size_t next = 0;
        for (bool ok : lowered) {
          if (!ok) {
            out.append(py::none());
            continue;
          }
          const cost::ProgramFeatures& f = mp.programs[next++];
          py::array_t<float> a({f.num_rows, cost::kNumFeatures});
          std::copy(f.values.begin(), f.values.end(), a.mutable_data());
          out.append(std::move(a));
        }
        return out;
      },
      py::arg("outputs"), py::arg("inputs"), py::arg("schedules"),
      "Per schedule, its feature rows as a float32 array [stores, features] (search mode's "
      "cost-model input), or None when it does not lower.");
  m.def(
      "analytic_estimates",
      [](const std::vector<PyTensor>& outputs, const std::vector<PyTensor>& inputs,
         const std::vector<schedule::KernelSchedule>& schedules) {
        py::gil_scoped_release release;
        tune::Task task = tune::Task::create(unwrap(outputs), unwrap(inputs), "estimate");
        tune::search::SearchSpace space(task);
        const cost::MemoryHierarchy hw = cost::host_memory_hierarchy();
        std::vector<double> ms;
        for (const schedule::KernelSchedule& s : schedules) {
          ms.push_back(tune::search::analytic_estimate_ms(space, hw, task.target.num_threads, s));
        }
        return ms;
      },
      py::arg("outputs"), py::arg("inputs"), py::arg("schedules"),
      "Per schedule, Gensor's analytic time estimate in ms (search mode's ranking before its "
      "learned model has samples), or -1 where the model cannot estimate it.");
}

}  // namespace

void bind_search(py::module_& m) {
  m.def("reset_search_model", &compiler::reset_shared_search_model,
        "Forgets what this process's search cost model learned (benchmarks compare strategies "
        "from the same empty model).");
  bind_tune_tasks(m);
  bind_search_task(m);
  bind_model_eval(m);
  bind_program_features(m);
}

}  // namespace tessera::python
