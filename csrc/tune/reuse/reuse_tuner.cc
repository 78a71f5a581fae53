#include "tune/reuse/reuse_tuner.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "tune/reuse/trial_estimate.h"
#include "tune/search/space.h"
#include "util/check.h"

namespace tessera::tune::reuse {

namespace {

using schedule::KernelSchedule;
using schedule::StageAnnotation;

// The best few schedules a reuse tuning measured, each timed in its own round's short batch,
// are timed again together with the rules' schedule (see ReuseSearch::final_race).
constexpr int kFinalists = 4;
// The final race's timing: longer rounds than a tuning round's (5 ms x 3), as the choice between
// finalists a few percent apart is made there alone.
constexpr int kRaceRounds = 9;
constexpr double kRaceRoundMs = 20;

// The search over one reuse pair: the user's space, the measurer and what was measured.
class ReuseSearch {
 public:
  ReuseSearch(const Task& user, const KernelSchedule& source_schedule,
              const ReuseTunerOptions& options)
      : user_(user), space_(user), measurer_(user, options.measure) {
    const int variant = space_.variant_index(source_schedule.plan);
    TESSERA_CHECK(variant >= 0) << "reuse: " << user.name << " offers no plan "
                                << source_schedule.plan.text() << " (sketch sets differ)";
    const schedule::StagePlan& plan = user.plan_for(source_schedule.plan);
    anchor_ = anchor_stage_index(plan);
    choices_ = &space_.variant(variant).stages[anchor_];
    base_ = schedule::default_schedule(plan, user.target);
    base_.plan = source_schedule.plan;
    base_.tuner = "reuse";
    base_ = user.as_run(base_);
  }

  const gensor::StageSpace& space() const { return choices_->space; }
  int anchor() const { return anchor_; }
  const search::StageChoices& choices() const { return *choices_; }
  int trials() const { return static_cast<int>(measured_.size()); }

  // The schedule with `ann` as its anchor stage, when the space accepts it.
  std::optional<KernelSchedule> candidate(const StageAnnotation& ann) const {
    KernelSchedule k = base_;
    k.stages[anchor_] = ann;
    k = user_.as_run(std::move(k));  // serial when the task runs serial
    if (!space_.check_structure(k).empty()) return std::nullopt;
    return k;
  }

  // Measures the candidates not measured yet; returns the fastest of `cands` and `incumbent`
  // (when given) that verified, or nullopt.
  std::optional<KernelSchedule> best_of(const std::vector<StageAnnotation>& anns,
                                        const std::optional<KernelSchedule>& incumbent) {
    std::vector<KernelSchedule> cands;
    for (const StageAnnotation& a : anns) {
      if (std::optional<KernelSchedule> k = candidate(a)) cands.push_back(std::move(*k));
    }
    if (incumbent) cands.push_back(*incumbent);
    measure(cands);
    std::optional<KernelSchedule> best;
    for (const KernelSchedule& k : cands) {
      if (!best || time_of(k) < time_of(*best)) best = k;
    }
    if (best && !std::isfinite(time_of(*best))) return std::nullopt;
    return best;
  }

  double time_of(const KernelSchedule& k) const { return measured_.at(search::schedule_key(k)).ms; }

  // The kFinalists fastest schedules measured and the rules' schedule (last), timed again in
  // one paired batch, the incumbent first as the batch's reference. Each tuning round chose its
  // best within its own short batch, and the rounds ran seconds apart on a machine whose speed
  // drifts: without the race, the round that happened to run fastest decides. A re-timing is
  // not a trial (no schedule is new).
  std::vector<RacedSchedule> final_race(const Task& user, const MeasureConfig& config) const {
    std::vector<const Measured*> ok;
    for (const auto& [key, m] : measured_) {
      if (std::isfinite(m.ms)) ok.push_back(&m);
    }
    std::stable_sort(ok.begin(), ok.end(),
                     [](const Measured* a, const Measured* b) { return a->ms < b->ms; });
    std::vector<KernelSchedule> race;
    const std::string rules_key = search::schedule_key(base_);
    for (const Measured* m : ok) {
      if (static_cast<int>(race.size()) >= kFinalists) break;
      if (search::schedule_key(m->schedule) != rules_key) race.push_back(m->schedule);
    }
    race.push_back(base_);
    MeasureConfig timing = config;
    timing.rounds = kRaceRounds;
    timing.round_ms = kRaceRoundMs;
    CandidateMeasurer racer(user, timing);
    const std::vector<CandidateResult> res = racer.measure_all(race);
    std::vector<RacedSchedule> out;
    for (size_t i = 0; i < race.size(); ++i)
      out.push_back({race[i], res[i].ok ? res[i].median_ms : -1});
    return out;
  }

  const KernelSchedule& base() const { return base_; }
  void measure(const std::vector<KernelSchedule>& cands) {
    std::vector<KernelSchedule> fresh;
    for (const KernelSchedule& k : cands) {
      const std::string key = search::schedule_key(k);
      if (measured_.count(key)) continue;
      // infinity until it runs; also dedupes within `cands`
      measured_[key] = Measured{k, std::numeric_limits<double>::infinity()};
      fresh.push_back(k);
    }
    if (fresh.empty()) return;
    const std::vector<CandidateResult> res = measurer_.measure_all(fresh);
    for (size_t i = 0; i < fresh.size(); ++i) {
      if (res[i].ok) measured_[search::schedule_key(fresh[i])].ms = res[i].median_ms;
    }
  }

 private:
  struct Measured {
    KernelSchedule schedule;
    double ms = 0;  // its tuning round's time; infinity when it failed
  };
  const Task& user_;
  search::SearchSpace space_;
  CandidateMeasurer measurer_;
  int anchor_ = 0;
  const search::StageChoices* choices_ = nullptr;
  KernelSchedule base_;
  std::map<std::string, Measured> measured_;  // by schedule_key
};

// B values in range, nearest the range's centre (on a log scale) first.
std::vector<int64_t> ordered_task_counts(const gensor::StageSpace& sp, const Range& r, int cap) {
  std::vector<int64_t> b = values_within(task_counts(sp), r);
  const double centre = std::sqrt(r.lo * r.hi);
  std::stable_sort(b.begin(), b.end(), [&](int64_t x, int64_t y) {
    return std::abs(std::log(x / centre)) < std::abs(std::log(y / centre));
  });
  if (cap > 0 && static_cast<int>(b.size()) > cap) b.resize(cap);
  return b;
}

// Round 1: one candidate per register-tile count in range.
std::vector<StageAnnotation> register_tile_round(const ReuseSearch& s, const StageAnnotation& src,
                                                 const FeatureRanges& ranges, int64_t tasks,
                                                 const std::vector<int64_t>& bshape,
                                                 const std::vector<int64_t>& lshape) {
  const double b = static_cast<double>(tasks);
  const Range per_task = {ranges.register_tiles.lo / b, ranges.register_tiles.hi / b};
  std::vector<StageAnnotation> out;
  for (int64_t tiles : values_within(divisor_products(bshape), per_task)) {
    std::optional<std::vector<int64_t>> tshape = get_tshape(s.space(), bshape, tiles);
    if (tshape) out.push_back(annotation_with_shapes(src, s.space(), bshape, *tshape, lshape));
  }
  return out;
}

// Round 2: the outer-reduce shapes whose M is in range.
std::vector<StageAnnotation> lshape_round(const ReuseSearch& s, const StageAnnotation& best,
                                          const FeatureRanges& ranges, int64_t tasks) {
  std::vector<StageAnnotation> out;
  for (const std::vector<int64_t>& l : lshape_choices(s.space())) {
    const double m =
        static_cast<double>(tasks) * panel_bytes_per_task(s.space(), best.tile_outer, l);
    if (ranges.panel_bytes.contains(m))
      out.push_back(annotation_with_shapes(best, s.space(), best.tile_outer, best.tile_reg, l));
  }
  return out;
}

// Round 3: the other unroll depths.
std::vector<StageAnnotation> unroll_round(const StageAnnotation& best) {
  std::vector<StageAnnotation> out;
  for (int64_t u = 1; u <= search::SpaceLimits{}.max_reduce_unroll; u *= 2) {
    if (u == best.reduce_unroll) continue;
    StageAnnotation a = best;
    a.reduce_unroll = u;
    out.push_back(a);
  }
  return out;
}

// Round 4: packing toggled per packable operand, and the narrower vector widths.
std::vector<StageAnnotation> pack_width_round(const ReuseSearch& s, const StageAnnotation& best) {
  std::vector<StageAnnotation> out;
  for (const std::string& p : s.choices().packable) {
    StageAnnotation a = best;
    auto it = std::find(a.pack.begin(), a.pack.end(), p);
    if (it != a.pack.end()) {
      a.pack.erase(it);
    } else {
      a.pack.push_back(p);
    }
    out.push_back(a);
  }
  if (best.vector_axis >= 0) {
    for (int w = best.vector_width / 2; w >= 1; w /= 2) {
      StageAnnotation a = best;
      a.vector_width = w;
      out.push_back(a);
    }
  }
  return out;
}

const StageAnnotation& anchor_of(const KernelSchedule& k, int anchor) { return k.stages[anchor]; }

}  // namespace

ReuseTuneResult reuse_tune(const Task& user, const Task& source,
                           const KernelSchedule& source_schedule,
                           const ReuseTunerOptions& options) {
  const ReuseOperator u = describe_operator(user), s = describe_operator(source);
  TESSERA_CHECK(can_reuse(u, s)) << "reuse: " << user.name << " cannot reuse " << source.name;
  const schedule::StagePlan& source_plan = source.plan_for(source_schedule.plan);
  const int source_anchor = anchor_stage_index(source_plan);
  const StageAnnotation& src_as_tuned = source_schedule.stages.at(source_anchor);
  const gensor::StageSpace source_space =
      gensor::make_stage_space(source_plan, source_anchor, source.target);

  ReuseTuneResult result;
  result.source_features = reuse_features(source_space, src_as_tuned);
  result.ranges = feature_ranges(u, s, result.source_features);
  const FeatureRanges& ranges = result.ranges;
  ReuseSearch search(user, source_schedule, options);
  const int anchor = search.anchor();
  // The source's annotation in the user's names (packed operands by position).
  StageAnnotation src = src_as_tuned;
  src.pack = translate_operands(src.pack, source_plan, user.plan_for(source_schedule.plan));

  std::optional<KernelSchedule> best;
  const double source_panel_per_task =
      result.source_features.panel_bytes / result.source_features.tasks;
  for (int64_t tasks : ordered_task_counts(search.space(), ranges.tasks, options.max_task_counts)) {
    std::optional<std::vector<int64_t>> bshape = get_bshape(search.space(), tasks);
    if (!bshape) continue;
    const std::vector<int64_t> lshape = get_lshape(search.space(), *bshape, source_panel_per_task);
    std::optional<KernelSchedule> round_best = search.best_of(
        register_tile_round(search, src, ranges, tasks, *bshape, lshape), std::nullopt);
    if (!round_best) continue;
    ++result.task_counts_tried;
    round_best = search.best_of(lshape_round(search, anchor_of(*round_best, anchor), ranges, tasks),
                                round_best);
    round_best = search.best_of(unroll_round(anchor_of(*round_best, anchor)), round_best);
    round_best =
        search.best_of(pack_width_round(search, anchor_of(*round_best, anchor)), round_best);
    if (!best || search.time_of(*round_best) < search.time_of(*best)) best = round_best;
  }
  // The rules' schedule is always a candidate (one trial): a reuse never ends slower than it,
  // whatever the source's program was (a bridge chain from another batch size, say).
  const std::optional<KernelSchedule> rules = search.best_of({}, search.base());
  if (!best || (rules && search.time_of(*rules) < search.time_of(*best))) best = rules;
  TESSERA_CHECK(best.has_value()) << "reuse: no schedule of " << user.name << " verified";
  result.best = *best;
  result.best_ms = search.time_of(*best);
  result.race = search.final_race(user, options.measure);
  const RacedSchedule* winner = nullptr;
  for (const RacedSchedule& r : result.race) {
    if (r.ms > 0 && (!winner || r.ms < winner->ms)) winner = &r;
  }
  if (winner) {  // else none ran again: the rounds' verdict stands
    result.best = winner->schedule;
    result.best_ms = winner->ms;
  }
  result.trials = search.trials();
  return result;
}

}  // namespace tessera::tune::reuse
