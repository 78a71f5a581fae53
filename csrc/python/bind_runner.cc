// Runners from Python: measuring a task sent as text (_C.measure_canonical, what a Ray worker
// calls) and a tune::Runner implemented by a Python object (_C.python_runner), so that search
// mode can measure on a Ray cluster (tessera/runners/).
#include <pybind11/stl.h>

#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "compiler/compile.h"
#include "python/bindings.h"
#include "python/runner_arg.h"
#include "schedule/random_schedule.h"
#include "tune/remote_measure.h"
#include "tune/runner.h"
#include "util/check.h"

namespace py = pybind11;

namespace tessera::python {

namespace {

py::dict result_dict(const tune::CandidateResult& r) {
  py::dict d;
  d["ok"] = r.ok;
  d["error"] = r.error;
  d["median_ms"] = r.median_ms;
  d["build_ms"] = r.build_ms;
  d["abandoned"] = r.abandoned;
  d["repeats"] = r.repeats;
  d["rounds"] = r.rounds;
  return d;
}

// A result dict back from Python (missing keys keep their defaults). Throws (std::runtime_error,
// py::cast_error) on a value of the wrong type.
tune::CandidateResult result_from(const py::handle& item) {
  if (!py::isinstance<py::dict>(item)) throw std::runtime_error("a result is not a dict");
  const py::dict d = py::reinterpret_borrow<py::dict>(item);
  tune::CandidateResult r;
  if (d.contains("ok")) r.ok = d["ok"].cast<bool>();
  if (d.contains("error")) r.error = py::str(d["error"]).cast<std::string>();
  if (d.contains("median_ms")) r.median_ms = d["median_ms"].cast<double>();
  if (d.contains("build_ms")) r.build_ms = d["build_ms"].cast<double>();
  if (d.contains("abandoned")) r.abandoned = d["abandoned"].cast<bool>();
  if (d.contains("repeats")) r.repeats = d["repeats"].cast<int>();
  if (d.contains("rounds")) r.rounds = d["rounds"].cast<int>();
  if (r.ok && !(r.median_ms > 0)) {
    r.ok = false;
    r.error = "the runner reported no time";
  }
  return r;
}

std::vector<tune::CandidateResult> all_failed(size_t n, const std::string& why) {
  std::vector<tune::CandidateResult> out(n);
  for (tune::CandidateResult& r : out) r.error = why;
  return out;
}

// A Python object, released with the GIL held (the search may drop its runner on a thread that
// does not hold it).
std::shared_ptr<py::object> hold(py::object obj) {
  return std::shared_ptr<py::object>(new py::object(std::move(obj)), [](py::object* o) {
    py::gil_scoped_acquire gil;
    delete o;
  });
}

class PythonTaskRunner : public tune::TaskRunner {
 public:
  PythonTaskRunner(std::shared_ptr<py::object> obj, std::string name, const tune::Task& task)
      : obj_(std::move(obj)), name_(std::move(name)), text_(task), parallel_(task.parallel) {}

  // Invariant of TaskRunner: one result per schedule; a failing Python call fails the batch's
  // candidates (with its message), never the search.
  std::vector<tune::CandidateResult> measure(
      const std::vector<schedule::KernelSchedule>& schedules) override {
    std::vector<std::string> sent;
    sent.reserve(schedules.size());
    for (const schedule::KernelSchedule& s : schedules) sent.push_back(text_.to_canonical(s));
    py::gil_scoped_acquire gil;  // compile runs with the GIL released
    try {
      py::object out = obj_->attr("measure")(text_.dag_text(), sent, parallel_);
      const py::list items(out);
      if (items.size() != schedules.size()) {
        return all_failed(schedules.size(), "runner '" + name_ + "' returned " +
                                                std::to_string(items.size()) + " results for " +
                                                std::to_string(schedules.size()) + " candidates");
      }
      std::vector<tune::CandidateResult> results;
      for (const py::handle item : items) results.push_back(result_from(item));
      return results;
    } catch (py::error_already_set& e) {
      return all_failed(schedules.size(), "runner '" + name_ + "' failed: " + e.what());
    } catch (const std::exception& e) {
      return all_failed(schedules.size(), "runner '" + name_ + "' failed: " + e.what());
    }
  }

 private:
  std::shared_ptr<py::object> obj_;
  std::string name_;
  tune::TaskText text_;
  bool parallel_;
};

class PythonRunner : public tune::Runner {
 public:
  PythonRunner(std::shared_ptr<py::object> obj, std::string name)
      : obj_(std::move(obj)), name_(std::move(name)) {}
  std::string name() const override { return name_; }
  std::unique_ptr<tune::TaskRunner> open(const tune::Task& task) override {
    return std::make_unique<PythonTaskRunner>(obj_, name_, task);
  }

 private:
  std::shared_ptr<py::object> obj_;
  std::string name_;
};

// The object's `name` attribute when it has a string one, else its class name.
std::string runner_name(const py::object& obj) {
  if (py::hasattr(obj, "name")) {
    py::object name = obj.attr("name");
    if (py::isinstance<py::str>(name)) return name.cast<std::string>();
  }
  return py::str(py::type::of(obj).attr("__name__")).cast<std::string>();
}

}  // namespace

std::shared_ptr<tune::Runner> runner_from_arg(const py::object& arg) {
  if (arg.is_none()) return nullptr;
  if (py::isinstance<tune::Runner>(arg)) return arg.cast<std::shared_ptr<tune::Runner>>();
  if (py::isinstance<py::str>(arg)) {
    const std::string name = arg.cast<std::string>();
    if (name == "workers" || name == "in-process") return tune::runner_named(name);
  }
  // Ray and users' runner objects live in Python.
  return py::module_::import("tessera.runners")
      .attr("native_runner")(arg)
      .cast<std::shared_ptr<tune::Runner>>();
}

void bind_runner(py::module_& m) {
  py::class_<tune::Runner, std::shared_ptr<tune::Runner>>(
      m, "Runner", "Where search mode measures candidates (tune/runner.h).")
      .def_property_readonly("name", &tune::Runner::name)
      .def("__repr__", [](const tune::Runner& r) { return "Runner(" + r.name() + ")"; });
  m.def(
      "python_runner",
      [](py::object obj) -> std::shared_ptr<tune::Runner> {
        TESSERA_CHECK(py::hasattr(obj, "measure"))
            << "a runner object needs a measure(dag_text, schedules_json, parallel) method";
        const std::string name = runner_name(obj);
        return std::make_shared<PythonRunner>(hold(std::move(obj)), name);
      },
      py::arg("obj"),
      "A Runner measuring through obj.measure(dag_text, schedules_json, parallel) -> list of "
      "dicts (ok, error, median_ms, build_ms), one per schedule (see _C.measure_canonical); an "
      "exception fails the batch's candidates with its message.");
  m.def(
      "measure_canonical",
      [](const std::string& dag_text, const std::vector<std::string>& schedules, bool parallel) {
        std::vector<tune::CandidateResult> results;
        {
          py::gil_scoped_release release;  // candidates build and run on Tessera's threads
          results = tune::measure_canonical(dag_text, schedules, parallel);
        }
        py::list out;
        for (const tune::CandidateResult& r : results) out.append(result_dict(r));
        return out;
      },
      py::arg("dag_text"), py::arg("schedules"), py::arg("parallel") = true,
      "Measures schedules (JSON in canonical names) of the workload whose canonical text (with "
      "plan hints) is dag_text, as search mode would in-process: a list of dicts (ok, error, "
      "median_ms, build_ms, abandoned, repeats, rounds), one per schedule. Raises TesseraError "
      "when the text does not parse or its default schedule does not build.");
  m.def(
      "task_text",
      [](const std::vector<PyTensor>& outputs, const std::vector<PyTensor>& inputs, int random,
         uint64_t seed) {
        const tune::Task task = tune::Task::create(unwrap(outputs), unwrap(inputs));
        const tune::TaskText text(task);
        std::vector<std::string> schedules{text.to_canonical(task.default_schedule())};
        std::mt19937_64 rng(seed);
        for (int i = 0; i < random; ++i) {
          schedules.push_back(text.to_canonical(
              task.as_run(schedule::random_schedule(task.plan, task.target, rng))));
        }
        return py::make_tuple(text.dag_text(), schedules);
      },
      py::arg("outputs"), py::arg("inputs"), py::arg("random") = 0, py::arg("seed") = 0,
      "(dag_text, schedules): the kernel of `outputs` as a runner sends it, and schedules of it in "
      "canonical names: the rules' schedule, then `random` random ones (for tests of runners).");
}

}  // namespace tessera::python
