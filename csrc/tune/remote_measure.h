#pragma once
// Measuring a task in another process (a Ray worker, maybe on another machine): the task travels
// as text, the compute DAG's canonical text with plan hints (db/canonical_parse.h), and its
// schedules in canonical names (db/schedule_names.h), so the worker needs nothing of the
// driver's objects and a schedule means the same stage on both sides.
//
//   driver:  TaskText text(task);  send text.dag_text() and text.to_canonical(s) for each s
//   worker:  measure_canonical(dag_text, schedules, parallel, config)  -> results, no kernels
//
// The worker measures exactly as CandidateMeasurer::measure_all does in-process: each candidate
// is verified against the task's default schedule and the survivors of one batch are timed
// paired against each other, so times within one batch are comparable.
#include <string>
#include <vector>

#include "db/workload_key.h"
#include "tune/common.h"

namespace tessera::tune {

// A task as it is sent: its DAG text and its tensors' names for translating schedules.
class TaskText {
 public:
  // The DAG is the task's plan (after the planner's rewrites, e.g. long sums split), so that the
  // worker plans the very stages the driver's schedules annotate.
  explicit TaskText(const Task& task);
  const std::string& dag_text() const { return dag_text_; }
  // `s` as JSON in canonical names.
  std::string to_canonical(const schedule::KernelSchedule& s) const;

 private:
  std::string dag_text_;
  db::WorkloadKey names_;  // only tensor_names and reduce_order are used
};

// Parses the DAG text, plans it (Task::create; `parallel` as Task::parallel) and measures every
// schedule (JSON in canonical names). A schedule that does not parse fails alone; results carry
// no kernels. Throws tessera::Error when the text does not parse or the task cannot be measured
// (its default schedule does not build).
std::vector<CandidateResult> measure_canonical(const std::string& dag_text,
                                               const std::vector<std::string>& schedules_json,
                                               bool parallel, const MeasureConfig& config = {});

}  // namespace tessera::tune
