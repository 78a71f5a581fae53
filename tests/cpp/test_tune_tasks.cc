// Search mode's session and the whole-model tuner, with a fake runner (made-up times, nothing
// built): a session counts and reports every measurement, keeps the rules' schedule unless
// beaten by the win margin, and tells what it would have chosen after fewer measurements;
// tune_tasks gives every searched task a warm-up round, follows the chosen allocation, skips
// kernels too small to tune and kernels the records database has, and stores its choices;
// Spearman's rho and the held-out evaluation behave as defined.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "compiler/search_session.h"
#include "compiler/tune_tasks.h"
#include "const_dims.h"
#include "db/records.h"
#include "ops/ops.h"
#include "schedule/tuning_policy.h"
#include "tune/search/model_eval.h"

namespace tessera::compiler {
namespace {

using schedule::KernelSchedule;
using testing::dims;

// A made-up time from the schedule alone: larger register tiles are faster, down to a floor.
double fake_ms(const KernelSchedule& s) {
  double points = 1;
  for (int64_t t : s.stages[0].tile_reg) points *= static_cast<double>(t);
  return 1 + 16 / std::min(points, 64.0);
}

// A made-up time that differs between almost any two schedules, the same on every measurement.
double hashed_ms(const KernelSchedule& s) {
  return 1 + static_cast<double>(std::hash<std::string>()(s.stages_text()) % 1000) / 1000;
}

using FakeTime = double (*)(const KernelSchedule&);

// Times by `time` (fake_ms unless given); `scale` makes one task slower than another.
class FakeRunner : public tune::Runner {
 public:
  explicit FakeRunner(std::map<std::string, double> scale, FakeTime time = fake_ms)
      : scale_(std::move(scale)), time_(time) {}
  std::string name() const override { return "fake"; }
  std::unique_ptr<tune::TaskRunner> open(const tune::Task& task) override {
    const double scale = scale_.count(task.name) ? scale_.at(task.name) : 1.0;
    return std::make_unique<Fake>(scale, time_, &measured[task.name]);
  }
  std::map<std::string, int> measured;  // candidates per task name

 private:
  class Fake : public tune::TaskRunner {
   public:
    Fake(double scale, FakeTime time, int* count) : scale_(scale), time_(time), count_(count) {}
    std::vector<tune::CandidateResult> measure(const std::vector<KernelSchedule>& batch) override {
      std::vector<tune::CandidateResult> out;
      for (const KernelSchedule& s : batch) {
        ++*count_;
        tune::CandidateResult r;
        r.ok = true;
        r.median_ms = scale_ * time_(s);
        out.push_back(r);
      }
      return out;
    }

   private:
    double scale_;
    FakeTime time_;
    int* count_;
  };
  std::map<std::string, double> scale_;
  FakeTime time_;
};

TaskSpec gemm(const std::string& name, int64_t m, int64_t k, int64_t n, double weight = 1) {
  ir::Tensor a = ir::placeholder("A", dims({m, k}));
  ir::Tensor b = ir::placeholder("B", dims({k, n}));
  return TaskSpec{{ops::matmul(a, b)}, {a, b}, name, weight, {}};
}

// A reuse request measured by `runner`, from an empty cost model.
TuneTasksRequest reuse_request(
    std::shared_ptr<tune::Runner> runner, int trials_per_task,
    tune::reuse::SelectionMethod selection = tune::reuse::SelectionMethod::kGreedyBridges) {
  TuneTasksRequest req;
  req.scope = TuneScope::kEvery;  // what is tuned is reuse's to say, not the size rule's
  req.trials_per_task = trials_per_task;
  req.fresh_model = true;
  req.runner = std::move(runner);
  req.reuse = true;
  req.reuse_selection = selection;
  return req;
}

TEST(SearchSession, ReportsEveryMeasurementAndChoosesByTheWinMargin) {
  TaskSpec spec = gemm("g", 128, 256, 128);
  tune::Task task = tune::Task::create(spec.outputs, spec.inputs, "g");
  auto runner = std::make_shared<FakeRunner>(std::map<std::string, double>{});
  SearchSettings s;
  s.trials = 24;
  s.per_round = 8;
  s.fresh_model = true;
  s.runner = runner;
  int events = 0;
  double last_best = 1e30;
  s.on_trial = [&](const TrialEvent& e) {
    ++events;
    EXPECT_EQ(e.trial, events);
    EXPECT_EQ(e.trials, 24);
    EXPECT_LE(e.best_ms, last_best);  // the best so far never gets worse
    last_best = e.best_ms;
  };
  CompileReport rep;
  SearchSession session(task, s, &rep);
  int rounds = 0;
  while (session.round() > 0) ++rounds;
  EXPECT_EQ(rounds, 3);
  EXPECT_EQ(rep.trials, 24);
  EXPECT_EQ(events, 24);
  EXPECT_EQ(runner->measured["g"], 24);
  EXPECT_GT(rep.default_ms, 0);  // the rules' schedule is measured in the first round
  Tuned t = session.finish();
  // The final race times up to four finalists again with the rules' schedule, in one batch that
  // counts as no trial.
  const int raced = runner->measured["g"] - 24;
  EXPECT_GE(raced, 2);
  EXPECT_LE(raced, 5);
  EXPECT_EQ(rep.trials, 24);
  int chosen = 0;
  for (const CandidateReport& c : rep.candidates) chosen += c.chosen;
  EXPECT_EQ(chosen, 1);
  if (t.schedule.tuner == "search") {
    EXPECT_LT(rep.median_ms, schedule::tuning_policy().win_margin * rep.default_ms);
  } else {
    EXPECT_EQ(rep.median_ms, rep.default_ms);
  }
  EXPECT_EQ(t.kernel, nullptr);  // the fake runner builds nothing: the caller builds the choice
}

// choice_within(n) is what the search would have chosen after n measurements: the fastest of
// those n (the race times them again, and the fake runner's times do not change), unless the
// rules' schedule wins by the margin; it measures no trial. Over all trials it is finish()'s.
TEST(SearchSession, ChoiceWithinTheFirstNMeasurementsComesFromThem) {
  TaskSpec spec = gemm("g", 128, 256, 128);
  tune::Task task = tune::Task::create(spec.outputs, spec.inputs, "g");
  auto runner = std::make_shared<FakeRunner>(std::map<std::string, double>{}, hashed_ms);
  SearchSettings s;
  s.trials = 24;
  s.per_round = 8;
  s.fresh_model = true;
  s.runner = runner;
  CompileReport rep;
  SearchSession session(task, s, &rep);
  while (session.round() > 0) {
  }
  const double margin = schedule::tuning_policy().win_margin;
  const double rules_ms = hashed_ms(task.default_schedule());
  // k: the position of the first measurement of the fastest schedule; within k it is unseen.
  size_t k = 0;
  for (size_t i = 0; i < rep.candidates.size(); ++i) {
    if (hashed_ms(rep.candidates[i].schedule) < hashed_ms(rep.candidates[k].schedule)) k = i;
  }
  ASSERT_GT(k, 0u);
  for (size_t n : {k, k + 1, rep.candidates.size()}) {
    double best = 1e30;
    std::set<std::string> first_n;
    for (size_t i = 0; i < n; ++i) {
      best = std::min(best, hashed_ms(rep.candidates[i].schedule));
      first_n.insert(rep.candidates[i].schedule.stages_text());
    }
    const KernelSchedule chosen = session.choice_within(n);
    if (best < margin * rules_ms) {
      EXPECT_EQ(chosen.tuner, "search") << n;
      EXPECT_EQ(hashed_ms(chosen), best) << n;
      EXPECT_EQ(first_n.count(chosen.stages_text()), 1u) << n;
    } else {
      EXPECT_EQ(chosen.tuner, "default") << n;
      EXPECT_EQ(chosen.stages_text(), task.default_schedule().stages_text()) << n;
    }
  }
  EXPECT_EQ(rep.trials, 24);
  EXPECT_EQ(session.choice_within(24).stages_text(), session.finish().schedule.stages_text());
}

TEST(TuneTasks, RoundRobinWarmsUpEveryTaskAndSkipsSmallOnes) {
  auto runner = std::make_shared<FakeRunner>(std::map<std::string, double>{});
  TuneTasksRequest req;
  req.trials = 48;
  req.strategy = tune::search::Allocation::kRoundRobin;
  req.fresh_model = true;
  req.runner = runner;
  TuneTasksResult r =
      tune_tasks({gemm("a", 128, 256, 128), gemm("tiny", 8, 8, 8), gemm("b", 256, 128, 128)}, req);
  ASSERT_EQ(r.tasks.size(), 3u);
  EXPECT_EQ(r.tasks[1].status, "skipped");
  EXPECT_EQ(r.tasks[0].status, "search");
  EXPECT_EQ(r.tasks[2].status, "search");
  EXPECT_EQ(r.round_trials, 8);  // 48 / (3 rounds x 2 tasks)
  ASSERT_EQ(r.order.size(), 6u);
  for (size_t i = 0; i < r.order.size(); ++i) EXPECT_EQ(r.order[i], i % 2 == 0 ? 0 : 2);
  EXPECT_EQ(r.trials_after.back(), 48);
  // The trials, and each task's final race of at most four finalists and the rules' schedule.
  EXPECT_GE(runner->measured["a"] + runner->measured["b"], 48 + 2 * 2);
  EXPECT_LE(runner->measured["a"] + runner->measured["b"], 48 + 2 * 5);
  EXPECT_EQ(runner->measured.count("tiny"), 0u);
  EXPECT_TRUE(std::isfinite(r.objective.back()));
}

TEST(TuneTasks, GradientGivesTheHeavierTaskMoreRoundsAndStoresChoices) {
  // Task "heavy" runs 8 times per model run and is 4x slower: improving it lowers the objective
  // far more, so after the warm-up the gradient favours it.
  auto runner = std::make_shared<FakeRunner>(std::map<std::string, double>{{"heavy", 4.0}});
  db::RecordsDB records = db::RecordsDB::open(":memory:");
  TuneTasksRequest req;
  req.scope = TuneScope::kEvery;  // both tasks are searched: the test is about their rounds
  req.trials = 96;
  req.fresh_model = true;
  req.runner = runner;
  req.records = &records;
  TuneTasksResult r =
      tune_tasks({gemm("light", 128, 256, 128, 1), gemm("heavy", 256, 256, 128, 8)}, req);
  ASSERT_EQ(r.tasks.size(), 2u);
  EXPECT_GT(r.tasks[1].rounds, r.tasks[0].rounds);
  EXPECT_GE(r.tasks[0].rounds, 1);  // the warm-up round
  // Choices stored: a second run finds both in the records and measures nothing.
  auto again = std::make_shared<FakeRunner>(std::map<std::string, double>{});
  req.runner = again;
  TuneTasksResult r2 =
      tune_tasks({gemm("light", 128, 256, 128, 1), gemm("heavy", 256, 256, 128, 8)}, req);
  EXPECT_EQ(r2.tasks[0].status, "records");
  EXPECT_EQ(r2.tasks[1].status, "records");
  EXPECT_TRUE(again->measured.empty());
  EXPECT_EQ(r2.tasks[1].schedule.stages_text(), r.tasks[1].schedule.stages_text());
}

TEST(TuneTasks, ReuseSearchesTheSelectionsRootsAndTunesTheOthersFromThem) {
  // Three GEMMs of one kind, each one's loop nest dominated by the next: the reuse selection
  // roots one of them; the others are tuned by the reuse tuner from a tuned choice (real builds
  // and measurements, verified), never by the (fake) search runner, and their choices are stored.
  auto runner = std::make_shared<FakeRunner>(std::map<std::string, double>{});
  db::RecordsDB records = db::RecordsDB::open(":memory:");
  // A full search costs more than a reuse edge's estimated trials only with a real budget.
  TuneTasksRequest req = reuse_request(runner, 256);
  req.records = &records;
  const std::vector<TaskSpec> specs = {gemm("small", 128, 256, 128), gemm("mid", 128, 256, 256),
                                       gemm("big", 256, 256, 256)};
  TuneTasksResult r = tune_tasks(specs, req);
  ASSERT_EQ(r.tasks.size(), 3u);
  int searched = 0, reused = 0;
  for (size_t i = 0; i < r.tasks.size(); ++i) {
    const TaskOutcome& o = r.tasks[i];
    if (o.status == "search") {
      ++searched;
      EXPECT_GT(runner->measured[o.name], 0);
      continue;
    }
    ASSERT_EQ(o.status, "reuse") << o.name << ": " << o.report.note;
    ++reused;
    EXPECT_EQ(runner->measured.count(o.name), 0u) << o.name << " was searched";
    ASSERT_GE(o.reused_from, 0);
    EXPECT_NE(o.reused_from, static_cast<int>(i));
    EXPECT_GT(o.report.trials, 0);
    EXPECT_EQ(o.schedule.tuner, "reuse");
  }
  EXPECT_EQ(searched, 1);
  EXPECT_EQ(reused, 2);
  EXPECT_GT(r.reuse_trials, 0);
  // Stored: a second run finds every task in the records.
  TuneTasksResult again = tune_tasks(specs, req);
  for (const TaskOutcome& o : again.tasks) EXPECT_EQ(o.status, "records") << o.name;
}

TEST(TuneTasks, ReuseTunesABridgeSoThatIncomparableTasksShareOneSearch) {
  // [M, N, K] = [256, 128, 256] and [128, 256, 256]: neither dominates the other, so without a
  // bridge both need a full search; through their bridge [128, 128, 256] one search serves both.
  auto runner = std::make_shared<FakeRunner>(std::map<std::string, double>{});
  TuneTasksResult r = tune_tasks({gemm("tall", 256, 256, 128), gemm("wide", 128, 256, 256)},
                                 reuse_request(runner, 256));
  ASSERT_EQ(r.tasks.size(), 3u);
  ASSERT_TRUE(r.tasks[2].bridge);
  EXPECT_FALSE(r.tasks[0].bridge || r.tasks[1].bridge);
  int searches = 0, through_bridge = 0;
  double weight_through_bridge = 0;
  for (size_t i = 0; i < r.tasks.size(); ++i) {
    const TaskOutcome& o = r.tasks[i];
    if (o.status == "search") {
      ++searches;
      EXPECT_GT(runner->measured[o.name], 0);
      continue;
    }
    ASSERT_EQ(o.status, "reuse") << o.name << ": " << o.report.note;
    EXPECT_EQ(runner->measured.count(o.name), 0u);
    if (o.bridge) continue;
    // Does its chain of sources pass through the bridge?
    for (int s = o.reused_from; s >= 0; s = r.tasks[s].reused_from) {
      if (s == 2) {
        ++through_bridge;
        weight_through_bridge += o.weight;
        break;
      }
    }
  }
  EXPECT_EQ(searches, 1);
  EXPECT_GE(through_bridge, 1);
  EXPECT_DOUBLE_EQ(r.tasks[2].weight, weight_through_bridge);
}

TEST(TuneTasks, ReuseWithoutBridgesSearchesIncomparableTasksApart) {
  // The ablation of the test above: the arborescence has no bridge, so each of two incomparable
  // GEMMs gets a full search and no bridge task joins.
  auto runner = std::make_shared<FakeRunner>(std::map<std::string, double>{});
  // Each is searched whatever the budget: a small one.
  TuneTasksResult r =
      tune_tasks({gemm("tall", 256, 256, 128), gemm("wide", 128, 256, 256)},
                 reuse_request(runner, 32, tune::reuse::SelectionMethod::kArborescence));
  ASSERT_EQ(r.tasks.size(), 2u);
  for (const TaskOutcome& o : r.tasks) {
    EXPECT_EQ(o.status, "search") << o.name;
    EXPECT_GT(runner->measured[o.name], 0) << o.name;
  }
  EXPECT_EQ(r.reuse_trials, 0);
}

TEST(TuneTasks, TopKTriesTheGroupsBestProgramsOnTheOtherMembers) {
  // Selective Tuning's baseline: the group's largest GEMM is searched; each other member
  // measures at most kTopKPrograms of its best programs (real builds, verified) and keeps one of
  // them, whatever their extents (neither smaller GEMM is dominated-searched here).
  auto runner = std::make_shared<FakeRunner>(std::map<std::string, double>{});
  TuneTasksResult r = tune_tasks(
      {gemm("tall", 256, 256, 128), gemm("big", 256, 256, 256), gemm("wide", 128, 192, 256)},
      reuse_request(runner, 64, tune::reuse::SelectionMethod::kTopK));
  ASSERT_EQ(r.tasks.size(), 3u);
  EXPECT_EQ(r.tasks[1].status, "search");
  EXPECT_GT(runner->measured["big"], 0);
  int tried = 0;
  for (int i : {0, 2}) {
    const TaskOutcome& o = r.tasks[i];
    ASSERT_EQ(o.status, "reuse") << o.name << ": " << o.report.note;
    EXPECT_EQ(o.reused_from, 1);
    EXPECT_EQ(o.schedule.tuner, "topk");
    EXPECT_GE(o.report.trials, 1);
    EXPECT_LE(o.report.trials, tune::reuse::kTopKPrograms);
    EXPECT_EQ(runner->measured.count(o.name), 0u) << o.name << " was searched";
    tried += o.report.trials;
  }
  EXPECT_EQ(r.reuse_trials, tried);
}

TEST(TuneTasks, ReuseTakesProgramsStoredByAnotherModelFromTheRecords) {
  // A "base" model tuned first stores its choices; a "large" model whose kernels dominate the
  // base's is then tuned from those records (another model, as if in another process): no full
  // search at all.
  db::RecordsDB records = db::RecordsDB::open(":memory:");
  TuneTasksRequest req =
      reuse_request(std::make_shared<FakeRunner>(std::map<std::string, double>{}), 16);
  req.records = &records;
  tune_tasks({gemm("base_a", 128, 256, 128), gemm("base_b", 128, 128, 256)}, req);
  auto runner = std::make_shared<FakeRunner>(std::map<std::string, double>{});
  req.runner = runner;
  TuneTasksResult r =
      tune_tasks({gemm("large_a", 256, 256, 128), gemm("large_b", 128, 256, 256)}, req);
  ASSERT_EQ(r.tasks.size(), 2u);
  for (const TaskOutcome& o : r.tasks) {
    ASSERT_EQ(o.status, "reuse") << o.name << ": " << o.report.note;
    EXPECT_EQ(o.reused_from, -1);
    EXPECT_EQ(o.reused_from_name.rfind("records:", 0), 0u) << o.reused_from_name;
    EXPECT_GT(o.report.trials, 0);
  }
  EXPECT_TRUE(runner->measured.empty());
  EXPECT_GT(r.reuse_trials, 0);
}

TEST(ModelEval, SpearmanOfMonotoneReversedTiedAndConstantSeries) {
  using tune::search::spearman;
  EXPECT_DOUBLE_EQ(spearman({1, 2, 3, 4}, {10, 20, 30, 400}), 1.0);
  EXPECT_DOUBLE_EQ(spearman({1, 2, 3, 4}, {4, 3, 2, 1}), -1.0);
  EXPECT_DOUBLE_EQ(spearman({1, 1, 1}, {1, 2, 3}), 0.0);
  // Ties share ranks: x = {1, 2, 2, 3} -> ranks {1, 2.5, 2.5, 4}.
  EXPECT_NEAR(spearman({1, 2, 2, 3}, {1, 2, 3, 4}), 0.9486832980505138, 1e-12);
}

TEST(ModelEval, HeldOutNeedsOtherTasksToTrainOn) {
  tune::search::MeasuredPrograms only{
      "t", {cost::ProgramFeatures{}, cost::ProgramFeatures{}}, {1.0, 2.0}};
  const std::vector<double> rho = tune::search::heldout_spearman({only});
  ASSERT_EQ(rho.size(), 1u);
  EXPECT_TRUE(std::isnan(rho[0]));
}

}  // namespace
}  // namespace tessera::compiler
