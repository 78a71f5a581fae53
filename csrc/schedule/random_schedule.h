#pragma once
// Random valid annotations for a stage: the sampling step of search-based tuning, and the
// generator behind the lowering fuzz tests (any schedule it returns must lower to a correct
// kernel).
#include <random>

#include "schedule/default_schedule.h"

namespace tessera::schedule {

StageAnnotation random_stage_annotation(const Stage& stage, const StagePlan& plan,
                                        const Target& target, std::mt19937_64& rng);
KernelSchedule random_schedule(const StagePlan& plan, const Target& target, std::mt19937_64& rng);

}  // namespace tessera::schedule
