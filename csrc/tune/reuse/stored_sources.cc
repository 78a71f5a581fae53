#include "tune/reuse/stored_sources.h"

#include <cmath>
#include <limits>
#include <map>

#include "db/canonical_parse.h"
#include "db/schedule_names.h"
#include "db/workload_key.h"

namespace tessera::tune::reuse {

namespace {

// The best record per workload (hash + shapes + canonical text). Every record was written by a
// tuning run (one whose winner was the rules' schedule too: a measured program all the same).
std::vector<db::Record> best_tuned_records(db::RecordsDB& records, const std::string& target) {
  db::RecordFilter filter;
  filter.target = target;
  std::map<std::string, db::Record> best;
  for (db::Record& r : records.all(filter)) {
    const std::string id = r.workload_hash + "\n" + r.shapes + "\n" + r.canonical;
    auto it = best.find(id);
    if (it == best.end() || db::record_better(r, it->second)) best[id] = std::move(r);
  }
  std::vector<db::Record> out;
  for (auto& [id, r] : best) out.push_back(std::move(r));
  return out;
}

std::optional<StoredSource> rebuild(const db::Record& r) {
  try {
    const db::ParsedDag dag = db::parse_canonical(r.canonical);
    StoredSource s;
    s.name = "records:" + r.workload_hash.substr(0, 8);
    s.task = Task::create(dag.outputs, dag.inputs, s.name);
    const db::WorkloadKey key = db::make_workload_key(dag.outputs, dag.inputs);
    s.schedule = schedule::KernelSchedule::parse(db::schedule_from_canonical(key, r.schedule_json));
    s.op = describe_operator(s.task);
    s.median_ms = r.median_ms.value_or(0);
    return s;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

double extent_distance(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    d += std::fabs(std::log(static_cast<double>(a[i]) / static_cast<double>(b[i])));
  }
  return d;
}

}  // namespace

std::vector<StoredSource> stored_sources(db::RecordsDB& records, const std::string& target) {
  std::vector<StoredSource> out;
  for (const db::Record& r : best_tuned_records(records, target)) {
    if (std::optional<StoredSource> s = rebuild(r)) out.push_back(std::move(*s));
  }
  return out;
}

const StoredSource* nearest_source(const ReuseOperator& user,
                                   const std::vector<StoredSource>& sources) {
  const StoredSource* best = nullptr;
  double best_distance = std::numeric_limits<double>::infinity();
  for (const StoredSource& s : sources) {
    if (!can_reuse(user, s.op)) continue;
    const double d = extent_distance(user.extents, s.op.extents);
    if (d < best_distance) {
      best_distance = d;
      best = &s;
    }
  }
  return best;
}

}  // namespace tessera::tune::reuse
