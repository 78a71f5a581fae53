#include "tune/remote_measure.h"

#include <exception>

#include "db/canonical_parse.h"
#include "db/canonical_text.h"
#include "db/schedule_names.h"
#include "util/check.h"

namespace tessera::tune {

namespace {

// The names schedule translation needs from a canonical form (the rest of a key is not used).
db::WorkloadKey translation_names(const db::CanonicalForm& form) {
  db::WorkloadKey names;
  for (const ir::Tensor& t : form.tensors) names.tensor_names.push_back(t->name);
  names.reduce_order = form.reduce_order;
  return names;
}

}  // namespace

TaskText::TaskText(const Task& task) {
  const db::CanonicalForm form = db::canonicalize(task.plan.outputs, task.plan.inputs);
  dag_text_ = form.text + db::plan_hints(form);
  names_ = translation_names(form);
}

std::string TaskText::to_canonical(const schedule::KernelSchedule& s) const {
  return db::schedule_to_canonical(names_, s.dump());
}

std::vector<CandidateResult> measure_canonical(const std::string& dag_text,
                                               const std::vector<std::string>& schedules_json,
                                               bool parallel, const MeasureConfig& config) {
  const db::ParsedDag dag = db::parse_canonical(dag_text);
  Task task = Task::create(dag.outputs, dag.inputs, "remote");
  task.parallel = parallel;
  // The parsed DAG prints back to its text (the parser's invariant); its tensors are named t<k>
  // and its summation iterators are in the hinted order, which the form records.
  const db::CanonicalForm form = db::canonicalize(dag.outputs, dag.inputs);
  TESSERA_CHECK(form.text == dag.canonical) << "the parsed DAG does not print back to its text";
  const db::WorkloadKey names = translation_names(form);

  std::vector<CandidateResult> results(schedules_json.size());
  std::vector<schedule::KernelSchedule> schedules;
  std::vector<size_t> slot;  // schedules[j] is candidate slot[j]
  for (size_t i = 0; i < schedules_json.size(); ++i) {
    try {
      schedules.push_back(
          schedule::KernelSchedule::parse(db::schedule_from_canonical(names, schedules_json[i])));
      slot.push_back(i);
    } catch (const std::exception& e) {
      results[i].error = std::string("schedule does not parse: ") + e.what();
    }
  }
  CandidateMeasurer measurer(task, config);
  std::vector<CandidateResult> measured = measurer.measure_all(schedules);
  for (size_t j = 0; j < measured.size(); ++j) {
    measured[j].kernel.reset();  // the driver builds the winner itself
    results[slot[j]] = std::move(measured[j]);
  }
  return results;
}

}  // namespace tessera::tune
