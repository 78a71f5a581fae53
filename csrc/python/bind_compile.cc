// Typed objects of the compile pipeline from Python: schedules and their stage annotations,
// compile requests and reports, the tuning policy and the pipeline's counters. JSON stays for
// the records database and for printing (KernelSchedule.dump / str()).
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "compiler/compile.h"
#include "python/bindings.h"
#include "python/runner_arg.h"
#include "python/trial_callback.h"
#include "runtime/paired_timing.h"
#include "schedule/annotation.h"
#include "schedule/tuning_policy.h"
#include "util/check.h"
#include "util/counters.h"

namespace py = pybind11;

namespace tessera::python {

namespace {

void bind_schedule(py::module_& m) {
  py::class_<schedule::StageAnnotation>(m, "StageAnnotation",
                                        "One stage's schedule (schedule/annotation.h): the sketch "
                                        "and its numbers.")
      .def(py::init<>())
      .def_property(
          "sketch",
          [](const schedule::StageAnnotation& a) { return schedule::sketch_name(a.sketch); },
          [](schedule::StageAnnotation& a, const std::string& s) {
            a.sketch = schedule::sketch_from_name(s);
          })
      .def_readwrite("op", &schedule::StageAnnotation::op)
      .def_readwrite("tile_outer", &schedule::StageAnnotation::tile_outer)
      .def_readwrite("tile_mid", &schedule::StageAnnotation::tile_mid)
      .def_readwrite("tile_reg", &schedule::StageAnnotation::tile_reg)
      .def_readwrite("tile_reduce", &schedule::StageAnnotation::tile_reduce)
      .def_readwrite("vector_axis", &schedule::StageAnnotation::vector_axis)
      .def_readwrite("vector_width", &schedule::StageAnnotation::vector_width)
      .def_readwrite("s1_order", &schedule::StageAnnotation::s1_order)
      .def_readwrite("pack", &schedule::StageAnnotation::pack)
      .def_readwrite("parallel", &schedule::StageAnnotation::parallel)
      .def_readwrite("reduce_unroll", &schedule::StageAnnotation::reduce_unroll)
      .def_readwrite("prefetch", &schedule::StageAnnotation::prefetch)
      .def_readwrite("skew_axis", &schedule::StageAnnotation::skew_axis,
                     "Band products: the axis whose register rows share the vectors of reads "
                     "indexed by skew_axis + vector_axis (-1: none).")
      .def_property(
          "edge",
          [](const schedule::StageAnnotation& a) { return schedule::edge_mode_name(a.edge); },
          [](schedule::StageAnnotation& a, const std::string& s) {
            a.edge = schedule::edge_mode_from_name(s);
          },
          "Cut register tiles: 'split' (edge variants), 'local_pad' or 'guard' (if-checks).")
      .def("dump", [](const schedule::StageAnnotation& a) { return a.to_json().dump(); })
      .def("__repr__", [](const schedule::StageAnnotation& a) {
        return "StageAnnotation(" + a.to_json().dump() + ")";
      });
  py::class_<schedule::PlanChoices>(m, "PlanChoices",
                                    "Kernel-wide stage-plan choices (schedule/plan_choices.h): pad "
                                    "'materialize' | 'inline', epilogue 'fused' | 'separate'.")
      .def(py::init([](const std::string& pad, const std::string& epilogue) {
             return schedule::PlanChoices{schedule::pad_placement_from_name(pad),
                                          schedule::epilogue_placement_from_name(epilogue)};
           }),
           py::arg("pad") = "materialize", py::arg("epilogue") = "fused")
      .def_property(
          "pad", [](const schedule::PlanChoices& c) { return schedule::pad_placement_name(c.pad); },
          [](schedule::PlanChoices& c, const std::string& s) {
            c.pad = schedule::pad_placement_from_name(s);
          })
      .def_property(
          "epilogue",
          [](const schedule::PlanChoices& c) {
            return schedule::epilogue_placement_name(c.epilogue);
          },
          [](schedule::PlanChoices& c, const std::string& s) {
            c.epilogue = schedule::epilogue_placement_from_name(s);
          })
      .def("__eq__", &schedule::PlanChoices::operator==)
      .def("__repr__",
           [](const schedule::PlanChoices& c) { return "PlanChoices(" + c.text() + ")"; });
  py::class_<schedule::KernelSchedule>(m, "KernelSchedule",
                                       "A kernel's schedule: one StageAnnotation per stage, and "
                                       "the tuner that produced it.")
      .def(py::init<>())
      .def_readwrite("plan", &schedule::KernelSchedule::plan)
      .def_readwrite("stages", &schedule::KernelSchedule::stages)
      .def_readwrite("tuner", &schedule::KernelSchedule::tuner)
      .def("stages_text", &schedule::KernelSchedule::stages_text,
           "The stages alone: equal for schedules that build the same kernel, whoever made them.")
      .def("dump", &schedule::KernelSchedule::dump, "JSON (as the records database stores it).")
      .def_static("parse", &schedule::KernelSchedule::parse, py::arg("json"))
      .def("copy", [](const schedule::KernelSchedule& s) { return s; })
      .def("__eq__", [](const schedule::KernelSchedule& a,
                        const schedule::KernelSchedule& b) { return a.dump() == b.dump(); })
      .def("__str__", &schedule::KernelSchedule::dump)
      .def("__repr__",
           [](const schedule::KernelSchedule& s) { return "KernelSchedule(" + s.dump() + ")"; });
}

void bind_trial_event(py::module_& m) {
  using compiler::TrialEvent;
  py::class_<TrialEvent>(m, "TrialEvent",
                         "One measured search candidate (CompileRequest.on_trial).")
      .def_readonly("task", &TrialEvent::task)
      .def_readonly("trial", &TrialEvent::trial)
      .def_readonly("trials", &TrialEvent::trials)
      .def_readonly("ok", &TrialEvent::ok)
      .def_readonly("median_ms", &TrialEvent::median_ms)
      .def_readonly("best_ms", &TrialEvent::best_ms)
      .def_readonly("flops", &TrialEvent::flops)
      .def_readonly("elapsed_s", &TrialEvent::elapsed_s)
      .def_property_readonly("best_gflops",
                             [](const TrialEvent& e) {
                               return e.best_ms > 0 && e.flops > 0 ? e.flops / e.best_ms / 1e6
                                                                   : 0.0;
                             })
      .def("__repr__", [](const TrialEvent& e) {
        return "TrialEvent(" + e.task + " " + std::to_string(e.trial) + "/" +
               std::to_string(e.trials) + ")";
      });
}

void bind_request_and_report(py::module_& m) {
  using compiler::CompileRequest;
  bind_trial_event(m);
  py::class_<CompileRequest>(m, "CompileRequest", "What _C.compile is asked to do.")
      .def(py::init([](const std::string& name, const std::string& tune, const std::string& threads,
                       std::optional<schedule::KernelSchedule> schedule, db::RecordsDB* records,
                       bool keep_source, uint64_t seed, int trials, const py::object& runner,
                       const std::string& scope, double graph_reduce_points) {
             CompileRequest r;
             r.name = name;
             r.tune = compiler::tune_mode_from_name(tune);
             r.scope = compiler::tune_scope_from_name(scope);
             r.graph_reduce_points = graph_reduce_points;
             r.threads = compiler::threads_from_name(threads);
             r.schedule = std::move(schedule);
             r.records = records;
             r.keep_source = keep_source;
             r.seed = seed;
             r.trials = trials;
             r.runner = runner_from_arg(runner);
             return r;
           }),
           py::arg("name") = "kernel", py::arg("tune") = "default", py::arg("threads") = "auto",
           py::arg("schedule") = py::none(), py::arg("records") = nullptr,
           py::arg("keep_source") = false, py::arg("seed") = 0, py::arg("trials") = 0,
           py::arg("runner") = py::none(), py::arg("scope") = "every",
           py::arg("graph_reduce_points") = 0.0,
           // The request refers to the records database: keep it alive as long as the request.
           py::keep_alive<1, 6>())
      .def_readwrite("name", &CompileRequest::name)
      .def_property_readonly(
          "tune", [](const CompileRequest& r) { return compiler::tune_mode_name(r.tune); })
      .def_readwrite("schedule", &CompileRequest::schedule)
      .def_readwrite("keep_source", &CompileRequest::keep_source)
      .def_readwrite("seed", &CompileRequest::seed)
      .def_readwrite("trials", &CompileRequest::trials)
      .def_property_readonly(
          "scope",
          [](const CompileRequest& r) {
            return r.scope == compiler::TuneScope::kEvery ? "every" : "automatic";
          },
          "Which kernels the tuning mode tunes: 'every' (set with the "
          "keyword), or 'automatic': those worth it (TuningPolicy: "
          "min_tuned_kernel_us, large_share of graph_reduce_points).")
      .def_readwrite("graph_reduce_points", &CompileRequest::graph_reduce_points)
      .def_property_readonly(
          "runner",
          [](const CompileRequest& r) {
            return r.runner ? std::optional<std::string>(r.runner->name()) : std::nullopt;
          },
          "Search mode's runner's name (None: the tuning policy's). Set it with the keyword: "
          "'workers' | 'in-process' | 'ray' | 'auto' | 'ray://host:port' | a _C.Runner | an "
          "object with measure() (tessera.runners).")
      .def_property(
          "on_trial", [](const CompileRequest& r) { return static_cast<bool>(r.on_trial); },
          [](CompileRequest& r, py::object fn) { r.on_trial = trial_callback(std::move(fn)); },
          "Callable taking a TrialEvent after each search measurement (None: off); reads as "
          "whether one is set.")
      .def_readwrite("search_per_round", &CompileRequest::search_per_round)
      .def_readwrite("constant_inputs", &CompileRequest::constant_inputs,
                     "Positions of inputs whose values are the same on every call (weights): "
                     "those the schedule packs are read prepacked (Kernel.prepacks).");
  using compiler::CandidateReport;
  py::class_<CandidateReport>(m, "CandidateReport", "One schedule a tuner built, verified, timed.")
      .def_readonly("schedule", &CandidateReport::schedule)
      .def_readonly("predicted_ms", &CandidateReport::predicted_ms)
      .def_readonly("ok", &CandidateReport::ok)
      .def_readonly("error", &CandidateReport::error)
      .def_readonly("median_ms", &CandidateReport::median_ms)
      .def_readonly("build_ms", &CandidateReport::build_ms)
      .def_readonly("prepacked", &CandidateReport::prepacked)
      .def_readonly("chosen", &CandidateReport::chosen);
  using compiler::CompileReport;
  py::class_<CompileReport>(m, "CompileReport", "How _C.compile made a kernel.")
      .def_readonly("name", &CompileReport::name)
      .def_readonly("workload", &CompileReport::workload)
      .def_readonly("source", &CompileReport::source)
      .def_readonly("tuner", &CompileReport::tuner)
      .def_readonly("note", &CompileReport::note)
      .def_readonly("parallel", &CompileReport::parallel)
      .def_readonly("schedule", &CompileReport::schedule)
      .def_readonly("candidates", &CompileReport::candidates)
      .def_readonly("median_ms", &CompileReport::median_ms)
      .def_readonly("default_ms", &CompileReport::default_ms)
      .def_readonly("trials", &CompileReport::trials)
      .def_readonly("plan_ms", &CompileReport::plan_ms)
      .def_readonly("tune_s", &CompileReport::tune_s)
      .def_readonly("lower_ms", &CompileReport::lower_ms)
      .def_readonly("jit_ms", &CompileReport::jit_ms)
      .def_readonly("total_ms", &CompileReport::total_ms)
      .def("__repr__", [](const CompileReport& r) {
        return "CompileReport(" + r.name + ": " + r.source +
               (r.note.empty() ? std::string() : " (" + r.note + ")") + ")";
      });
}

void bind_policy_and_counters(py::module_& m) {
  using schedule::TuningPolicy;
  py::class_<TuningPolicy>(m, "TuningPolicy", "schedule/tuning_policy.h: what gets tuned, how.")
      .def_readonly("min_tuned_kernel_us", &TuningPolicy::min_tuned_kernel_us)
      .def_readonly("large_share", &TuningPolicy::large_share)
      .def_readonly("min_share_kernel_us", &TuningPolicy::min_share_kernel_us)
      .def_readonly("win_margin", &TuningPolicy::win_margin)
      .def_readonly("serial_bytes", &TuningPolicy::serial_bytes)
      .def_readonly("serial_points", &TuningPolicy::serial_points)
      .def_readonly("big_anchor_flops", &TuningPolicy::big_anchor_flops)
      .def_readonly("construct_top_k", &TuningPolicy::construct_top_k)
      .def_readonly("construct_chains", &TuningPolicy::construct_chains)
      .def_readonly("construct_iterations", &TuningPolicy::construct_iterations)
      .def_readonly("search_trials", &TuningPolicy::search_trials)
      .def_readonly("search_per_round", &TuningPolicy::search_per_round)
      .def_readonly("search_population", &TuningPolicy::search_population)
      .def_readonly("search_runner", &TuningPolicy::search_runner)
      .def_readonly("process_tune_budget_s", &TuningPolicy::process_tune_budget_s);
  m.def(
      "tuning_policy", []() { return schedule::tuning_policy(); },
      "A copy of the tuning policy in force.");
  m.def("compile_counters", &util::counters_snapshot,
        "Counts of the pipeline's expensive steps in this process: stage_plans, lowerings, "
        "jit_compiles, candidates, timing_runs, compile_calls, record_hits, tune_runs, tune_s.");
  m.def("reset_compile_counters", &util::reset_counters);
}

void bind_paired_timing(py::module_& m) {
  py::class_<runtime::PairedTiming>(m, "PairedTiming",
                                    "The result of time_paired (runtime/paired_timing.h).")
      .def_readonly("reference_ok", &runtime::PairedTiming::reference_ok)
      .def_readonly("reference_error", &runtime::PairedTiming::reference_error)
      .def_readonly("reference_ms", &runtime::PairedTiming::reference_ms)
      .def_readonly("reference_rounds", &runtime::PairedTiming::reference_rounds)
      .def_readonly("ok", &runtime::PairedTiming::ok)
      .def_readonly("error", &runtime::PairedTiming::error)
      .def_readonly("ratio", &runtime::PairedTiming::ratio)
      .def_readonly("median_ms", &runtime::PairedTiming::median_ms)
      .def_readonly("rounds", &runtime::PairedTiming::rounds)
      .def_readonly("calls", &runtime::PairedTiming::calls)
      .def_readonly("dropped", &runtime::PairedTiming::dropped);
  m.def(
      "time_paired",
      [](const std::function<void()>& reference,
         const std::vector<std::function<void()>>& candidates, int rounds, int min_rounds,
         double round_ms, int min_calls, double budget_ms, int finalists, int final_rounds,
         double final_budget_ms, double drop_ratio) {
        runtime::PairedTimingOptions o;
        o.rounds = rounds;
        o.min_rounds = min_rounds;
        o.round_ms = round_ms;
        o.min_calls = min_calls;
        o.budget_ms = budget_ms;
        o.finalists = finalists;
        o.final_rounds = final_rounds;
        o.final_budget_ms = final_budget_ms;
        o.drop_ratio = drop_ratio;
        // The callables are Python: the GIL stays held (pybind11 takes it per call anyway).
        return runtime::time_paired(reference, candidates, o);
      },
      py::arg("reference"), py::arg("candidates"), py::arg("rounds") = 3, py::arg("min_rounds") = 1,
      py::arg("round_ms") = 5.0, py::arg("min_calls") = 2, py::arg("budget_ms") = 2500.0,
      py::arg("finalists") = 0, py::arg("final_rounds") = 4, py::arg("final_budget_ms") = 1500.0,
      py::arg("drop_ratio") = 0.0,
      "Times candidates against a reference by Tessera's one noise rule "
      "(runtime/paired_timing.h); Python's entry is tessera.timing.");
}

}  // namespace

// A broken progress bar never costs the search; the callable is released with the GIL held.
compiler::TrialCallback trial_callback(py::object fn) {
  if (fn.is_none()) return {};
  auto held = std::shared_ptr<py::object>(new py::object(std::move(fn)), [](py::object* o) {
    py::gil_scoped_acquire gil;
    delete o;
  });
  auto broken = std::make_shared<bool>(false);
  return [held, broken](const compiler::TrialEvent& ev) {
    if (*broken) return;
    py::gil_scoped_acquire gil;
    try {
      (*held)(ev);
    } catch (py::error_already_set& e) {
      *broken = true;
      PyErr_WarnEx(
          PyExc_RuntimeWarning,
          ("tessera: the search's on_trial callback failed and is off: " + std::string(e.what()))
              .c_str(),
          1);
    }
  };
}

void bind_compile(py::module_& m) {
  bind_schedule(m);
  bind_request_and_report(m);
  bind_policy_and_counters(m);
  bind_paired_timing(m);
}

}  // namespace tessera::python
