#include "compiler/search_session.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <set>

#include "compiler/search_records.h"
#include "cost/xgb_model.h"
#include "schedule/tuning_policy.h"
#include "tune/gensor/construct.h"
#include "util/check.h"

namespace tessera::compiler {

namespace {

// Search overhead (everything but measurement) may take at most this share of a search's wall
// time (the bound; Ansor shrinks its population when feature extraction dominates).
constexpr double kMaxOverheadShare = 1.0 / 3;
// The population is never shrunk below this many schedules.
constexpr int kMinPopulation = 256;
// Schedules timed again together with the rules' at the end of a search (see final_race).
constexpr int kFinalists = 4;

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

cost::XGBOptions search_xgb_options() {
  cost::XGBOptions o;
  o.threads = 1;  // XGBoost's OpenMP threads would compete with the kernels' for the cores
  return o;
}

// One learned cost model and training set per process, shared by every task search mode tunes
// (Ansor's one model across tasks; labels are normalised per task).
struct SharedModel {
  std::mutex mu;
  std::unique_ptr<cost::XGBModel> model = std::make_unique<cost::XGBModel>(search_xgb_options());
  cost::TrainingSet data;
  bool load_tried = false;  // the records' saved model is looked for at the first search only
};

SharedModel& shared_model() {
  static SharedModel* m = new SharedModel();  // leaked: used until exit, from any thread
  return *m;
}

// Construct mode's predicted top-k: the first population's seeds.
std::vector<schedule::KernelSchedule> construct_seeds(const tune::Task& task, uint64_t seed) {
  tune::gensor::ConstructOptions o = tune::gensor::policy_construct_options(seed);
  o.predict_only = true;
  std::vector<schedule::KernelSchedule> out;
  for (const tune::gensor::ConstructCandidate& c : tune::gensor::construct(task, o).candidates)
    out.push_back(c.schedule);
  return out;
}

}  // namespace

// The model a session ranks with and trains: the shared one (under its lock), or its own.
struct SearchSession::ModelRef {
  std::mutex* mu = nullptr;  // null: not shared
  cost::CostModel* model = nullptr;
  cost::XGBModel* xgb = nullptr;  // the shared XGBoost model (saved with the records), else null
  cost::TrainingSet* data = nullptr;
  std::unique_ptr<cost::CostModel> own_model;
  cost::TrainingSet own_data;
};

SearchSettings search_settings(const CompileRequest& req) {
  SearchSettings s;
  s.name = req.name;
  s.trials = req.trials;
  s.per_round = req.search_per_round;
  s.seed = req.seed;
  s.runner = req.runner;
  s.on_trial = req.on_trial;
  return s;
}

void reset_shared_search_model() {
  SharedModel& shared = shared_model();
  std::lock_guard<std::mutex> lock(shared.mu);
  shared.model = std::make_unique<cost::XGBModel>(search_xgb_options());
  shared.data = cost::TrainingSet();
  shared.load_tried = false;
}

std::shared_ptr<tune::Runner> default_search_runner() {
  static std::shared_ptr<tune::Runner> runner =
      tune::runner_named(schedule::tuning_policy().search_runner);
  return runner;
}

SearchSession::SearchSession(const tune::Task& task, SearchSettings settings, CompileReport* report)
    : task_(task), settings_(std::move(settings)), rep_(report) {
  if (!settings_.key) settings_.log = nullptr;
  const schedule::TuningPolicy& policy = schedule::tuning_policy();
  if (settings_.trials <= 0) settings_.trials = policy.search_trials;
  if (settings_.per_round <= 0) settings_.per_round = policy.search_per_round;
  model_ = std::make_unique<ModelRef>();
  TESSERA_CHECK(settings_.model == "xgboost" || settings_.model == "xgboost_no_prior" ||
                settings_.model == "random")
      << "search model must be 'xgboost', 'xgboost_no_prior' or 'random', got '" << settings_.model
      << "'";
  if (settings_.model == "random") {
    model_->own_model = std::make_unique<cost::RandomModel>(settings_.seed);
  } else if (settings_.model == "xgboost_no_prior") {
    cost::XGBOptions trees_alone = search_xgb_options();
    trees_alone.prior_weight = 0;
    model_->own_model = std::make_unique<cost::XGBModel>(trees_alone);
  } else if (settings_.fresh_model) {
    model_->own_model = std::make_unique<cost::XGBModel>(search_xgb_options());
  }
  if (model_->own_model) {
    model_->model = model_->own_model.get();
    model_->data = &model_->own_data;
  } else {
    SharedModel& shared = shared_model();
    model_->mu = &shared.mu;
    model_->model = shared.model.get();
    model_->data = &shared.data;
    model_->xgb = shared.model.get();
    std::lock_guard<std::mutex> lock(shared.mu);
    if (settings_.log != nullptr && !shared.load_tried) {
      shared.load_tried = true;
      load_cost_model(*settings_.log, *shared.model, settings_.key->target);
    }
  }

  tune::search::SearchOptions sopts;
  sopts.trials = settings_.trials;
  sopts.per_round = std::min(sopts.trials, settings_.per_round);
  sopts.evolution.population = policy.search_population;
  sopts.retrain = settings_.retrain;
  sopts.diversity_pool = settings_.diversity_pool;
  sopts.seed = settings_.seed;
  sopts.model_ready = model_->model->available() && model_->model->trained();
  min_model_samples_ = sopts.min_model_samples;
  rules_ = task.default_schedule();
  rules_text_ = rules_.stages_text();
  sopts.initial.push_back(rules_);
  if (settings_.construct_seeds) {
    for (schedule::KernelSchedule& s : construct_seeds(task, settings_.seed))
      sopts.initial.push_back(std::move(s));
  }
  searcher_ = std::make_unique<tune::search::TaskSearcher>(task, std::move(sopts));
  runner_ = (settings_.runner ? settings_.runner : default_search_runner())->open(task);
  flops_ = task.flops();
  started_s_ = now_s();
  rep_->tuner = "search";
  if (settings_.log != nullptr) resume_from_log();
}

void SearchSession::resume_from_log() {
  std::unique_lock<std::mutex> lock;
  if (model_->mu != nullptr) lock = std::unique_lock<std::mutex>(*model_->mu);
  searcher_->restore(logged_search_trials(*settings_.log, *settings_.key, task_), *model_->data);
  for (const tune::search::Trial& t : searcher_->result().trials) take(t.schedule, t.result);
  const int restored = searcher_->result().restored;
  if (restored > 0) {
    rep_->note =
        "resumed from " + std::to_string(restored) + " candidate(s) an earlier search measured";
  }
}

SearchSession::~SearchSession() = default;

bool SearchSession::done() const { return searcher_->done(); }

double SearchSession::best_ms() const {
  return best_schedule_ ? best_ms_ : std::numeric_limits<double>::infinity();
}

const tune::search::SearchResult& SearchSession::result() const { return searcher_->result(); }

int SearchSession::round() {
  if (searcher_->done()) return 0;
  auto measure = [this](const std::vector<schedule::KernelSchedule>& batch) {
    return this->measure(batch);
  };
  std::unique_lock<std::mutex> lock;
  if (model_->mu != nullptr) lock = std::unique_lock<std::mutex>(*model_->mu);
  const int measured = searcher_->round(measure, *model_->model, *model_->data);
  save_model_if_refit();
  keep_overhead_bounded();
  return measured;
}

// Called under the model's lock, after a round (which refits the model; see TaskSearcher::round):
// the next process starts from it.
void SearchSession::save_model_if_refit() {
  if (settings_.log == nullptr || model_->xgb == nullptr || !model_->xgb->trained() ||
      static_cast<int>(model_->data->size()) < min_model_samples_)
    return;
  save_cost_model(*settings_.log, *model_->xgb, settings_.key->target,
                  static_cast<int64_t>(model_->data->size()));
}

void SearchSession::keep_overhead_bounded() {
  const tune::search::SearchStats& st = searcher_->result().stats;
  if (st.total_s <= 0 || st.overhead_s() <= kMaxOverheadShare * st.total_s) return;
  const int population = searcher_->population();
  if (population > kMinPopulation)
    searcher_->set_population(std::max(kMinPopulation, population / 2));
}

void SearchSession::take(const schedule::KernelSchedule& s, const tune::CandidateResult& r) {
  CandidateReport cr;
  cr.schedule = s;
  cr.ok = r.ok;
  cr.error = r.error;
  cr.median_ms = r.ok ? r.median_ms : -1;
  cr.build_ms = r.build_ms;
  cr.prepacked = static_cast<int>(task_.prepacked_inputs_or_none(s).size());
  rep_->candidates.push_back(cr);
  ++rep_->trials;
  if (r.ok && s.stages_text() == rules_text_) rep_->default_ms = r.median_ms;
  if (r.ok && (!best_schedule_ || r.median_ms < best_ms_)) {
    best_ms_ = r.median_ms;
    best_schedule_ = s;
    best_kernel_ = r.kernel;  // null when measured in another process or restored
  }
}

std::vector<tune::CandidateResult> SearchSession::measure(
    const std::vector<schedule::KernelSchedule>& batch) {
  std::vector<tune::CandidateResult> results = runner_->measure(batch);
  double shown_best = best_schedule_ ? best_ms_ : -1;  // the best so far, as each event sees it
  std::vector<db::Measurement> logged;
  for (size_t i = 0; i < results.size(); ++i) {
    take(batch[i], results[i]);
    if (settings_.log != nullptr) {
      logged.push_back(search_measurement(*settings_.key, batch[i], results[i], settings_.seed,
                                          searcher_->next_round(), rep_->trials - 1));
    }
  }
  if (settings_.log != nullptr) settings_.log->put_measurements(logged);  // before anything fails
  const int first = rep_->trials - static_cast<int>(results.size());
  for (size_t i = 0; i < results.size(); ++i) {
    tune::CandidateResult& r = results[i];
    r.kernel.reset();  // the search keeps its trials; only the best kernel stays alive
    if (r.ok && (shown_best < 0 || r.median_ms < shown_best)) shown_best = r.median_ms;
    if (settings_.on_trial) {
      TrialEvent ev;
      ev.task = settings_.name;
      ev.trial = first + static_cast<int>(i) + 1;
      ev.trials = settings_.trials;
      ev.ok = r.ok;
      ev.median_ms = r.ok ? r.median_ms : -1;
      ev.best_ms = shown_best;
      ev.flops = flops_;
      ev.elapsed_s = now_s() - started_s_;
      settings_.on_trial(ev);
    }
  }
  return results;
}

// The best few schedules of a search were each timed in their own round's batch, against that
// batch's reference; they are timed again together with the rules' schedule in one paired batch
// and the choice is made there (the one noise rule: a winner beats the rules' schedule in the
// same rounds). Without it, one lucky measurement in a late round decides the search.
SearchSession::Verdict SearchSession::decide(size_t n) {
  n = std::min(n, rep_->candidates.size());
  Verdict v;
  // The verified candidates, fastest first (ties in measurement order).
  std::vector<const CandidateReport*> ok;
  for (size_t i = 0; i < n; ++i) {
    const CandidateReport& c = rep_->candidates[i];
    if (!c.ok) continue;
    if (c.schedule.stages_text() == rules_text_) v.default_ms = c.median_ms;
    ok.push_back(&c);
  }
  if (ok.empty()) return v;
  std::stable_sort(ok.begin(), ok.end(), [](const CandidateReport* a, const CandidateReport* b) {
    return a->median_ms < b->median_ms;
  });
  const CandidateReport* best = ok.front();
  v.schedule = best->schedule;
  v.ms = best->median_ms;
  if (best_schedule_ && best->schedule.stages_text() == best_schedule_->stages_text())
    v.kernel = best_kernel_;

  std::vector<schedule::KernelSchedule> race;
  std::set<std::string> seen{rules_text_};
  for (const CandidateReport* c : ok) {
    if (static_cast<int>(race.size()) >= kFinalists) break;
    if (seen.insert(c->schedule.stages_text()).second) race.push_back(c->schedule);
  }
  if (race.empty()) return v;  // only the rules' schedule verified
  race.push_back(rules_);
  std::vector<tune::CandidateResult> results = runner_->measure_final_race(race);
  const tune::CandidateResult& rules = results.back();
  v.default_ms = rules.ok ? rules.median_ms : -1;
  int winner = -1;
  for (size_t i = 0; i + 1 < results.size(); ++i) {
    if (results[i].ok && (winner < 0 || results[i].median_ms < results[winner].median_ms))
      winner = static_cast<int>(i);
  }
  if (winner < 0) return v;  // the finalists failed this time: keep the search's own verdict
  v.schedule = race[winner];
  v.ms = results[winner].median_ms;
  v.kernel = results[winner].kernel;
  v.raced = static_cast<int>(race.size()) - 1;
  return v;
}

// Whether a verdict's schedule loses to the rules' by the policy's win margin.
bool SearchSession::rules_win(const Verdict& v) {
  return !v.schedule ||
         (v.default_ms > 0 && v.ms >= schedule::tuning_policy().win_margin * v.default_ms);
}

schedule::KernelSchedule SearchSession::choice_within(size_t n) {
  const Verdict v = decide(n);
  const bool rules = rules_win(v);
  schedule::KernelSchedule s = rules ? rules_ : *v.schedule;
  s.tuner = rules ? "default" : "search";
  return s;
}

Tuned SearchSession::finish() {
  if (!best_schedule_) {
    rep_->note = "no search candidate passed verification; the rules' schedule is used";
    return {rules_, nullptr};
  }
  const Verdict v = decide(rep_->candidates.size());
  rep_->default_ms = v.default_ms;
  if (v.raced > 0) {
    rep_->note += std::string(rep_->note.empty() ? "" : "; ") + "final race of " +
                  std::to_string(v.raced) + " finalist(s) and the rules' schedule";
  }
  auto mark_chosen = [this](const std::string& text) {
    bool marked = false;
    for (CandidateReport& c : rep_->candidates) {
      c.chosen = !marked && c.ok && c.schedule.stages_text() == text;
      marked = marked || c.chosen;
    }
  };
  if (rules_win(v)) {
    mark_chosen(rules_text_);
    rep_->median_ms = rep_->default_ms;
    Tuned t{rules_, nullptr};
    t.schedule.tuner = "default";
    return t;
  }
  mark_chosen(v.schedule->stages_text());
  Tuned t{*v.schedule, v.kernel};
  t.schedule.tuner = "search";
  rep_->median_ms = v.ms;
  return t;
}

}  // namespace tessera::compiler
