#include "tune/search/evolution.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "cost/features.h"
#include "tune/search/analytic_estimate.h"
#include "tune/search/diverse_pick.h"
#include "util/check.h"

namespace tessera::tune::search {

using schedule::KernelSchedule;

namespace {

constexpr double kInvalid = -std::numeric_limits<double>::infinity();
// Children made per population slot before a generation gives up filling it (mutations that
// apply nowhere and crossovers that break the structure return nothing).
constexpr int kChildTriesPerSlot = 4;
// Random samples tried per random pick before the space counts as exhausted.
constexpr int kRandomTriesPerPick = 20;

class Timer {
 public:
  Timer() : t0_(std::chrono::steady_clock::now()) {}
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  }

 private:
  std::chrono::steady_clock::time_point t0_;
};

// Roulette weights from scores: shifted so the worst valid one is (almost) zero; invalid ones
// never breed. A small floor keeps every valid individual in play when all scores are equal.
std::vector<double> fitness(const std::vector<double>& scores) {
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (double s : scores) {
    if (s == kInvalid) continue;
    lo = std::min(lo, s);
    hi = std::max(hi, s);
  }
  std::vector<double> w(scores.size(), 0.0);
  if (lo > hi) return w;
  const double floor = 1e-3 * (hi - lo) + 1e-12;
  for (size_t i = 0; i < scores.size(); ++i) {
    if (scores[i] != kInvalid) w[i] = scores[i] - lo + floor;
  }
  return w;
}

}  // namespace

std::vector<Scored> evolve(const SearchSpace& space, const Scorer& scorer,
                           const std::vector<KernelSchedule>& seeds,
                           const std::unordered_set<std::string>& exclude, int n,
                           const EvolutionOptions& options, std::mt19937_64& rng,
                           EvolutionStats* stats) {
  Timer all;
  EvolutionStats local;
  EvolutionStats& st = stats ? *stats : local;
  const int pop_size = std::max(2, options.population);
  // Everything scored in this call, by key: the picks come from all generations.
  std::unordered_map<std::string, Scored> seen;
  std::vector<KernelSchedule> pop;
  const size_t max_seeds = static_cast<size_t>(std::max(0.0, options.seed_share) * pop_size);
  for (const KernelSchedule& s : seeds) {
    if (pop.size() >= max_seeds) break;
    // Seeds are trusted (measured, or from another tuner): they need not fit the space's
    // register budget, only its stages. Their children are checked like any other.
    if (space.fits_variant(s)) pop.push_back(s);
  }
  {
    Timer t;
    while (static_cast<int>(pop.size()) < pop_size) pop.push_back(space.sample(rng));
    st.sample_s += t.seconds();
  }
  for (int g = 0;; ++g) {
    // Score the individuals not seen before, in one batch.
    std::vector<std::string> keys;
    std::vector<KernelSchedule> fresh;
    std::unordered_set<std::string> fresh_keys;
    for (const KernelSchedule& s : pop) {
      keys.push_back(schedule_key(s));
      if (!seen.count(keys.back()) && fresh_keys.insert(keys.back()).second) fresh.push_back(s);
    }
    if (!fresh.empty()) {
      const std::vector<double> sc = scorer(fresh);
      TESSERA_CHECK(sc.size() == fresh.size())
          << "scorer returned " << sc.size() << " scores for " << fresh.size() << " schedules";
      for (size_t i = 0; i < fresh.size(); ++i) {
        seen[schedule_key(fresh[i])] = Scored{fresh[i], sc[i]};
      }
      st.scored += static_cast<int>(fresh.size());
    }
    if (g >= options.generations) break;
    std::vector<double> scores;
    for (const std::string& k : keys) scores.push_back(seen[k].score);
    const std::vector<double> w = fitness(scores);
    if (std::all_of(w.begin(), w.end(), [](double x) { return x <= 0; })) break;
    std::discrete_distribution<size_t> roulette(w.begin(), w.end());
    std::vector<KernelSchedule> next;
    for (int tries = 0;
         static_cast<int>(next.size()) < pop_size && tries < kChildTriesPerSlot * pop_size;
         ++tries) {
      std::optional<KernelSchedule> child;
      if (std::uniform_real_distribution<double>(0, 1)(rng) < options.mutation_prob) {
        child = space.mutate(pop[roulette(rng)], rng);
      } else {
        child = space.crossover(pop[roulette(rng)], pop[roulette(rng)], rng);
      }
      if (child) next.push_back(std::move(*child));
    }
    st.children += static_cast<int>(next.size());
    if (next.empty()) break;
    pop = std::move(next);
  }
  std::vector<Scored> out;
  for (auto& [key, sc] : seen) {
    if (sc.score != kInvalid && !exclude.count(key)) out.push_back(sc);
  }
  // Best first; ties by key so that the order does not depend on hashing.
  std::sort(out.begin(), out.end(), [](const Scored& a, const Scored& b) {
    if (a.score != b.score) return a.score > b.score;
    return schedule_key(a.schedule) < schedule_key(b.schedule);
  });
  if (static_cast<int>(out.size()) > n) out.resize(std::max(0, n));
  st.evolve_s += all.seconds();
  return out;
}

TaskSearcher::TaskSearcher(const Task& task, SearchOptions options)
    : task_(task),
      work_(std::max(1.0, task.iteration_points())),
      options_(std::move(options)),
      space_(task, options_.space),
      rng_(options_.seed * 0x9e3779b97f4a7c15ull + 0x5eed),
      featurize_(task_, space_,
                 options_.hardware ? *options_.hardware : cost::host_memory_hierarchy(), work_) {}

bool TaskSearcher::done() const {
  return exhausted_ || static_cast<int>(result_.trials.size()) >= options_.trials;
}

std::vector<double> TaskSearcher::analytic_scores(const std::vector<KernelSchedule>& batch) {
  Timer t;
  std::vector<double> out;
  for (const KernelSchedule& s : batch) {
    const double ms =
        analytic_estimate_ms(space_, featurize_.hardware(), task_.target.num_threads, s);
    out.push_back(ms > 0 ? 1.0 / ms : kInvalid);
  }
  result_.stats.predict_s += t.seconds();
  result_.stats.scored += static_cast<int>(batch.size());
  return out;
}

std::vector<double> TaskSearcher::model_scores(const std::vector<KernelSchedule>& batch,
                                               const cost::CostModel& model) {
  std::vector<cost::ProgramFeatures> feats;
  std::vector<int> index(batch.size(), -1);
  for (size_t i = 0; i < batch.size(); ++i) {
    Timer tl;
    std::optional<loop::LoweredFunc> f = space_.try_lower(batch[i]);
    result_.stats.lower_s += tl.seconds();
    if (!f) continue;
    Timer tf;
    index[i] = static_cast<int>(feats.size());
    feats.push_back(featurize_(space_, batch[i], *f));
    result_.stats.feature_s += tf.seconds();
  }
  Timer tp;
  const std::vector<double> pred = model.predict(feats);
  result_.stats.predict_s += tp.seconds();
  result_.stats.scored += static_cast<int>(batch.size());
  std::vector<double> out;
  for (size_t i = 0; i < batch.size(); ++i) out.push_back(index[i] < 0 ? kInvalid : pred[index[i]]);
  return out;
}

int TaskSearcher::round(const Measure& measure, cost::CostModel& model, cost::TrainingSet& data) {
  if (done()) return 0;
  Timer total;
  SearchStats& st = result_.stats;
  const int n =
      std::min(options_.per_round, options_.trials - static_cast<int>(result_.trials.size()));
  const bool use_model =
      model.available() && model.trained() &&
      (options_.model_ready || static_cast<int>(data.size()) >= options_.min_model_samples);

  struct Pick {
    KernelSchedule schedule;
    std::string by;
    double score = 0;
  };
  std::vector<Pick> picks;
  std::unordered_set<std::string> picked;
  auto fresh = [&](const KernelSchedule& s) {
    const std::string k = schedule_key(s);
    return !measured_.count(k) && !picked.count(k);
  };
  auto add = [&](KernelSchedule s, const std::string& by, double score) {
    s.tuner = "search";
    picked.insert(schedule_key(s));
    picks.push_back({std::move(s), by, score});
  };
  if (result_.rounds == 0 && options_.measure_initial) {
    for (const KernelSchedule& s : options_.initial) {
      if (static_cast<int>(picks.size()) < n && fresh(s)) add(s, "initial", 0);
    }
  }
  const int left = n - static_cast<int>(picks.size());
  const int n_random =
      options_.eps_greedy > 0 && left > 0
          ? std::min(left, std::max(1, static_cast<int>(std::lround(options_.eps_greedy * n))))
          : 0;
  const int n_ranked = left - n_random;
  if (n_ranked > 0) {
    // Seeds: the best measured so far, then the initial schedules.
    std::vector<const Trial*> ok;
    for (const Trial& t : result_.trials) {
      if (t.result.ok) ok.push_back(&t);
    }
    std::sort(ok.begin(), ok.end(), [](const Trial* a, const Trial* b) {
      return a->result.median_ms < b->result.median_ms;
    });
    std::vector<KernelSchedule> seeds;
    for (const Trial* t : ok) seeds.push_back(t->schedule);
    for (const KernelSchedule& s : options_.initial) seeds.push_back(s);
    std::unordered_set<std::string> exclude = measured_;
    exclude.insert(picked.begin(), picked.end());
    const Scorer scorer = [&](const std::vector<KernelSchedule>& batch) {
      return use_model ? model_scores(batch, model) : analytic_scores(batch);
    };
    EvolutionStats es;
    const std::vector<Scored> best =
        evolve(space_, scorer, seeds, exclude, n_ranked * std::max(1, options_.diversity_pool),
               options_.evolution, rng_, &es);
    st.evolve_s += es.evolve_s;
    st.sample_s += es.sample_s;
    std::vector<KernelSchedule> ranked;
    for (const Scored& s : best) ranked.push_back(s.schedule);
    for (size_t i : pick_for_coverage(knobs_of(ranked), n_ranked))
      add(best[i].schedule, use_model ? "model" : "analytic", best[i].score);
  }
  {
    // The random share, and whatever evolution could not fill.
    Timer t;
    for (int tries = 0; static_cast<int>(picks.size()) < n && tries < kRandomTriesPerPick * n;
         ++tries) {
      KernelSchedule s = space_.sample(rng_);
      if (fresh(s)) add(std::move(s), "random", 0);
    }
    st.sample_s += t.seconds();
  }
  // Lower every pick before it is measured: one that does not lower is dropped here.
  std::vector<KernelSchedule> to_measure;
  std::vector<Pick> kept;
  std::vector<loop::LoweredFunc> lowered;
  {
    Timer t;
    for (Pick& p : picks) {
      std::optional<loop::LoweredFunc> f = space_.try_lower(p.schedule);
      if (!f) continue;
      lowered.push_back(std::move(*f));
      to_measure.push_back(p.schedule);
      kept.push_back(std::move(p));
    }
    st.lower_s += t.seconds();
  }
  if (to_measure.empty()) {
    exhausted_ = true;
    st.total_s += total.seconds();
    return 0;
  }
  std::vector<CandidateResult> results;
  {
    Timer t;
    results = measure(to_measure);
    st.measure_s += t.seconds();
  }
  TESSERA_CHECK(results.size() == to_measure.size())
      << "measure returned " << results.size() << " results for " << to_measure.size();
  for (size_t i = 0; i < kept.size(); ++i) {
    Trial tr;
    tr.schedule = kept[i].schedule;
    tr.result = results[i];
    tr.round = next_round();
    tr.picked_by = kept[i].by;
    tr.score = kept[i].score;
    record_trial(std::move(tr), &lowered[i], data);
  }
  if (model.available() && static_cast<int>(data.size()) >= options_.min_model_samples &&
      (options_.retrain || !model.trained())) {
    Timer t;
    model.fit(data.programs(), data.labels(), data.groups());
    st.train_s += t.seconds();
  }
  ++(use_model ? st.model_rounds : st.analytic_rounds);
  ++result_.rounds;
  st.total_s += total.seconds();
  return static_cast<int>(kept.size());
}

void TaskSearcher::record_trial(Trial trial, const loop::LoweredFunc* lowered,
                                cost::TrainingSet& data) {
  measured_.insert(schedule_key(trial.schedule));
  const bool ok = trial.result.ok && trial.result.median_ms > 0;
  if (lowered != nullptr) {
    Timer tf;
    data.add(task_.name, featurize_(space_, trial.schedule, *lowered),
             ok ? 1.0 / trial.result.median_ms : 0);
    result_.stats.feature_s += tf.seconds();
  }
  if (ok && (!result_.found || trial.result.median_ms < result_.best_ms)) {
    result_.found = true;
    result_.best = trial.schedule;
    result_.best_ms = trial.result.median_ms;
  }
  result_.trials.push_back(std::move(trial));
}

int TaskSearcher::restore(std::vector<Trial> earlier, cost::TrainingSet& data) {
  TESSERA_CHECK(result_.rounds == 0) << "restore() must come before the first round";
  int taken = 0;
  for (Trial& t : earlier) {
    if (measured_.count(schedule_key(t.schedule))) continue;
    first_round_ = std::max(first_round_, t.round + 1);
    t.picked_by = "restored";
    t.result.kernel.reset();
    // A schedule that no longer lowers (another Tessera version) still counts as measured, but
    // has no features to train on.
    Timer tl;
    const std::optional<loop::LoweredFunc> f = space_.try_lower(t.schedule);
    result_.stats.lower_s += tl.seconds();
    record_trial(std::move(t), f ? &*f : nullptr, data);
    ++taken;
  }
  result_.restored += taken;
  return taken;
}

SearchResult search_task(const Task& task, const SearchOptions& options, const Measure& measure,
                         cost::CostModel& model) {
  cost::TrainingSet data;
  TaskSearcher searcher(task, options);
  while (!searcher.done()) {
    if (searcher.round(measure, model, data) == 0) break;
  }
  return searcher.result();
}

}  // namespace tessera::tune::search
