#include "tune/reuse/top_k_tuner.h"

#include <optional>

#include "tune/reuse/reuse_condition.h"
#include "tune/reuse/reuse_space.h"
#include "tune/search/space.h"
#include "util/check.h"

namespace tessera::tune::reuse {

namespace {

// `program` (a schedule of `source`) as a schedule of `user`, when the user's space accepts it.
std::optional<schedule::KernelSchedule> transplant(const Task& user, const Task& source,
                                                   const search::SearchSpace& space,
                                                   const schedule::KernelSchedule& program) {
  if (space.variant_index(program.plan) < 0) return std::nullopt;
  const schedule::StagePlan& from = source.plan_for(program.plan);
  const schedule::StagePlan& to = user.plan_for(program.plan);
  const schedule::KernelSchedule rules = schedule::default_schedule(to, user.target);
  if (rules.stages.size() != program.stages.size()) return std::nullopt;
  schedule::KernelSchedule k = program;
  k.tuner = "topk";
  for (size_t i = 0; i < k.stages.size(); ++i) {
    k.stages[i].op = rules.stages[i].op;
    k.stages[i].pack = translate_operands(k.stages[i].pack, from, to);
  }
  k = user.as_run(std::move(k));
  if (!space.check_structure(k).empty()) return std::nullopt;
  return k;
}

}  // namespace

ReuseTuneResult top_k_tune(const Task& user, const Task& source,
                           const std::vector<schedule::KernelSchedule>& programs,
                           const MeasureConfig& measure) {
  TESSERA_CHECK(same_kind(describe_operator(user), describe_operator(source)))
      << "topk: " << user.name << " and " << source.name << " are not of one kind";
  const search::SearchSpace space(user);
  std::vector<schedule::KernelSchedule> cands;
  for (const schedule::KernelSchedule& p : programs) {
    if (std::optional<schedule::KernelSchedule> k = transplant(user, source, space, p))
      cands.push_back(std::move(*k));
  }
  CandidateMeasurer measurer(user, measure);
  ReuseTuneResult result;
  std::vector<CandidateResult> res = measurer.measure_all(cands);
  result.trials = static_cast<int>(cands.size());
  int best = -1;
  for (size_t i = 0; i < cands.size(); ++i) {
    if (res[i].ok && (best < 0 || res[i].median_ms < res[best].median_ms))
      best = static_cast<int>(i);
  }
  if (best < 0) {  // no program fits or verifies: the rules' schedule, one more trial
    cands = {user.as_run(user.default_schedule())};
    res = measurer.measure_all(cands);
    ++result.trials;
    TESSERA_CHECK(res[0].ok) << "topk: no schedule of " << user.name << " verified";
    best = 0;
  }
  result.best = cands[best];
  result.best_ms = res[best].median_ms;
  return result;
}

}  // namespace tessera::tune::reuse
