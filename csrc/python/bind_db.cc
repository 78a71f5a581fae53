// The tuning-records database from Python: tessera._C.RecordsDB and workload keys.
// Database calls release the GIL: they may wait up to the busy timeout for another process.
#include <pybind11/stl.h>

#include "db/records.h"
#include "db/workload_key.h"
#include "python/bindings.h"

namespace py = pybind11;

namespace tessera::python {

namespace {

db::WorkloadKey key_of(const std::vector<PyTensor>& outputs, const std::vector<PyTensor>& inputs,
                       const std::optional<std::string>& target) {
  return db::make_workload_key(unwrap(outputs), unwrap(inputs), target.value_or(""));
}

py::object optional_double(const std::optional<double>& v) {
  return v ? py::object(py::float_(*v)) : py::object(py::none());
}

py::dict record_dict(const db::Record& r) {
  py::dict d;
  d["id"] = r.id;
  d["workload_hash"] = r.workload_hash;
  d["shapes"] = r.shapes;
  d["target"] = r.target;
  d["canonical"] = r.canonical;
  d["schedule_json"] = r.schedule_json;
  d["tuner"] = r.tuner;
  d["median_ms"] = optional_double(r.median_ms);
  d["gflops"] = optional_double(r.gflops);
  d["trials"] = r.trials;
  d["created"] = r.created;
  d["version"] = r.version;
  return d;
}

py::dict measurement_dict(const db::Measurement& m) {
  py::dict d;
  d["id"] = m.id;
  d["workload_hash"] = m.workload_hash;
  d["target"] = m.target;
  d["schedule_json"] = m.schedule_json;
  d["tuner"] = m.tuner;
  d["ok"] = m.ok;
  d["error"] = m.error;
  d["median_ms"] = optional_double(m.median_ms);
  d["seed"] = m.seed;
  d["round"] = m.round;
  d["trial"] = m.trial;
  d["created"] = m.created;
  d["version"] = m.version;
  return d;
}

py::object best_of(db::RecordsDB& self, const db::WorkloadKey& key) {
  std::optional<db::Record> r;
  {
    py::gil_scoped_release release;
    r = self.best(key);
  }
  return r ? py::object(record_dict(*r)) : py::object(py::none());
}

bool put_for(db::RecordsDB& self, const db::WorkloadKey& key, const std::string& schedule_json,
             const std::string& tuner, std::optional<double> median_ms,
             std::optional<double> gflops, int64_t trials) {
  db::Record r = db::make_record(key, schedule_json, tuner, median_ms, gflops, trials);
  py::gil_scoped_release release;
  return self.put(r);
}

}  // namespace

void bind_db(py::module_& m) {
  py::class_<db::WorkloadKey>(m, "WorkloadKey",
                              "Database key of a workload: structural hash, shapes, target and "
                              "canonical text (which confirms a hash match).")
      .def(py::init([](uint64_t hash, const std::string& shapes, const std::string& target,
                       const std::string& canonical) {
             // A key made by the caller, for records that are not schedules of a tensor
             // expression (the backend's per-partition decisions): no tensor names to translate.
             db::WorkloadKey k;
             k.hash = hash;
             k.shapes = shapes;
             k.target = target;
             k.canonical = canonical;
             return k;
           }),
           py::arg("hash"), py::arg("shapes"), py::arg("target"), py::arg("canonical"))
      .def_readwrite("hash", &db::WorkloadKey::hash)
      .def_readwrite("shapes", &db::WorkloadKey::shapes)
      .def_readwrite("target", &db::WorkloadKey::target)
      .def_readwrite("canonical", &db::WorkloadKey::canonical)
      .def_readonly("tensor_names", &db::WorkloadKey::tensor_names)
      .def_property_readonly("hash_hex", &db::WorkloadKey::hash_hex)
      .def("same_workload", &db::WorkloadKey::same_workload)
      .def("__repr__", [](const db::WorkloadKey& k) {
        return "<WorkloadKey " + k.hash_hex() + " " + k.shapes + " " + k.target + ">";
      });

  m.def("workload_key", &key_of, py::arg("outputs"), py::arg("inputs"),
        py::arg("target") = py::none(), "The database key of the kernel outputs <- inputs.");
  m.def("host_target", &db::host_target,
        "Target string of this process, e.g. cpu:avx512:threads=2");
  m.def("records_default_path", &db::RecordsDB::default_path,
        "$TESSERA_RECORDS_DB, else <cache dir>/records.db ('' when neither is known).");

  py::class_<db::RecordsDB>(m, "RecordsDB",
                            "Tuning records in SQLite, shared between processes. Never raises on "
                            "a locked, damaged or unwritable file: it warns and keeps records in "
                            "memory instead.")
      .def(py::init([](const std::optional<std::string>& path, int busy_timeout_ms,
                       int retry_after_ms, bool warn_to_stderr) {
             db::RecordsDBOptions opts;
             opts.busy_timeout_ms = busy_timeout_ms;
             opts.retry_after_ms = retry_after_ms;
             opts.warn_to_stderr = warn_to_stderr;
             py::gil_scoped_release release;
             return db::RecordsDB::open(path.value_or(""), opts);
           }),
           py::arg("path") = py::none(), py::arg("busy_timeout_ms") = 3000,
           py::arg("retry_after_ms") = 10000, py::arg("warn_to_stderr") = true)
      .def(
          "best",
          [](db::RecordsDB& self, const std::vector<PyTensor>& outputs,
             const std::vector<PyTensor>& inputs, const std::optional<std::string>& target) {
            return best_of(self, key_of(outputs, inputs, target));
          },
          py::arg("outputs"), py::arg("inputs"), py::arg("target") = py::none(),
          "Best record (dict) of this workload, schedule in its own names; None if there is none.")
      .def("best_by_key", &best_of, py::arg("key"))
      .def(
          "put",
          [](db::RecordsDB& self, const std::vector<PyTensor>& outputs,
             const std::vector<PyTensor>& inputs, const std::string& schedule_json,
             const std::string& tuner, std::optional<double> median_ms,
             std::optional<double> gflops, int64_t trials,
             const std::optional<std::string>& target) {
            return put_for(self, key_of(outputs, inputs, target), schedule_json, tuner, median_ms,
                           gflops, trials);
          },
          py::arg("outputs"), py::arg("inputs"), py::arg("schedule_json"),
          py::arg("tuner") = "default", py::arg("median_ms") = py::none(),
          py::arg("gflops") = py::none(), py::arg("trials") = 0, py::arg("target") = py::none(),
          "Stores a record; True when written to the file, False when kept in memory only.")
      .def("put_by_key", &put_for, py::arg("key"), py::arg("schedule_json"),
           py::arg("tuner") = "default", py::arg("median_ms") = py::none(),
           py::arg("gflops") = py::none(), py::arg("trials") = 0)
      .def(
          "all",
          [](db::RecordsDB& self, std::optional<std::string> workload_hash,
             std::optional<std::string> shapes, std::optional<std::string> target,
             std::optional<std::string> tuner, int64_t limit) {
            db::RecordFilter f{workload_hash, shapes, target, tuner, limit};
            std::vector<db::Record> rs;
            {
              py::gil_scoped_release release;
              rs = self.all(f);
            }
            py::list out;
            for (const db::Record& r : rs) out.append(record_dict(r));
            return out;
          },
          py::arg("workload_hash") = py::none(), py::arg("shapes") = py::none(),
          py::arg("target") = py::none(), py::arg("tuner") = py::none(), py::arg("limit") = 0,
          "Records, oldest first (schedules in canonical names).")
      .def(
          "measurements",
          [](db::RecordsDB& self, const std::vector<PyTensor>& outputs,
             const std::vector<PyTensor>& inputs, const std::string& tuner,
             const std::optional<std::string>& target) {
            const db::WorkloadKey key = key_of(outputs, inputs, target);
            std::vector<db::Measurement> ms;
            {
              py::gil_scoped_release release;
              ms = self.measurements(key, tuner);
            }
            py::list out;
            for (const db::Measurement& m : ms) out.append(measurement_dict(m));
            return out;
          },
          py::arg("outputs"), py::arg("inputs"), py::arg("tuner") = "",
          py::arg("target") = py::none(),
          "Logged tuning measurements (dicts) of this workload, oldest first, schedules in its "
          "own names.")
      .def("count_measurements", &db::RecordsDB::count_measurements,
           py::call_guard<py::gil_scoped_release>())
      .def("count", &db::RecordsDB::count, py::call_guard<py::gil_scoped_release>())
      .def("flush", &db::RecordsDB::flush, py::call_guard<py::gil_scoped_release>())
      .def("take_warnings", &db::RecordsDB::take_warnings,
           "Warnings (str) issued since the last call, oldest first; also printed to stderr "
           "unless opened with warn_to_stderr=False.")
      .def_property_readonly("path", &db::RecordsDB::path)
      .def_property_readonly("mode",
                             [](const db::RecordsDB& self) { return db::mode_name(self.mode()); })
      .def_property_readonly("stats", [](const db::RecordsDB& self) {
        const db::RecordsDBStats s = self.stats();
        py::dict d;
        d["lookups"] = s.lookups;
        d["hits"] = s.hits;
        d["collisions"] = s.collisions;
        d["puts"] = s.puts;
        d["put_deferred"] = s.put_deferred;
        d["lock_timeouts"] = s.lock_timeouts;
        d["repairs"] = s.repairs;
        return d;
      });
}

}  // namespace tessera::python
