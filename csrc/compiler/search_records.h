#pragma once
// Search mode and the records database: every measurement is logged as it happens, a search
// killed before it finished resumes from its log, and the shared learned cost model is saved
// after each round and loaded by the next process. The SQL lives in db/; this file translates
// between the search's objects and the database's.
#include <cstdint>
#include <string>
#include <vector>

#include "cost/xgb_model.h"
#include "db/records.h"
#include "tune/common.h"
#include "tune/search/evolution.h"

namespace tessera::compiler {

// The log row of one measured candidate of search mode: `trial` is its position among the
// search's measurements (from 0, restored ones included).
db::Measurement search_measurement(const db::WorkloadKey& key,
                                   const schedule::KernelSchedule& schedule,
                                   const tune::CandidateResult& result, uint64_t seed, int round,
                                   int trial);

// The logged search measurements of the workload, as trials of `task` (its names), oldest first.
// A logged schedule that does not parse or does not fit the task's stages is skipped.
std::vector<tune::search::Trial> logged_search_trials(db::RecordsDB& records,
                                                      const db::WorkloadKey& key,
                                                      const tune::Task& task);

// Saves the trained model for `target` (replacing the one saved before); false when it is kept in
// memory only or could not be serialised.
bool save_cost_model(db::RecordsDB& records, const cost::XGBModel& model, const std::string& target,
                     int64_t samples);
// Replaces `model` with the one saved for `target` and these features; false when there is none
// (or it does not load: then `model` is as it was).
bool load_cost_model(db::RecordsDB& records, cost::XGBModel& model, const std::string& target);

}  // namespace tessera::compiler
