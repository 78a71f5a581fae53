// Resuming a search: TaskSearcher::restore counts earlier trials towards the budget and never
// measures their schedules again, and the compile call logs every measurement to the records
// database so that a search that died half-way resumes where it stopped.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <set>
#include <stdexcept>
#include <unordered_set>

#include "compiler/compile.h"
#include "const_dims.h"
#include "db/records.h"
#include "ops/ops.h"
#include "synthetic_hw.h"
#include "tune/runner.h"
#include "tune/search/evolution.h"

namespace tessera {
namespace {

using schedule::KernelSchedule;
using tune::CandidateResult;
using tune::search::SearchOptions;
using tune::search::TaskSearcher;
using tune::search::Trial;

// A made-up, deterministic run time per schedule (1 to 2 ms); every 7th schedule fails.
CandidateResult fake_result(const KernelSchedule& s) {
  const size_t h = std::hash<std::string>()(s.stages_text());
  CandidateResult r;
  r.ok = h % 7 != 0;
  r.median_ms = r.ok ? 1.0 + static_cast<double>(h % 1000) / 1000.0 : 0;
  if (!r.ok) r.error = "made to fail";
  return r;
}

// Counts what it is asked to measure.
struct CountingMeasure {
  std::vector<std::string> keys;
  int calls = 0;
  std::vector<CandidateResult> operator()(const std::vector<KernelSchedule>& batch) {
    ++calls;
    std::vector<CandidateResult> out;
    for (const KernelSchedule& s : batch) {
      keys.push_back(tune::search::schedule_key(s));
      out.push_back(fake_result(s));
    }
    return out;
  }
};

tune::Task gemm_task(int64_t m, int64_t k, int64_t n) {
  ir::Tensor a = ir::placeholder("A", testing::dims({m, k}));
  ir::Tensor b = ir::placeholder("B", testing::dims({k, n}));
  return tune::Task::create({ops::matmul(a, b)}, {a, b}, "gemm");
}

SearchOptions small_options() {
  SearchOptions o;
  o.trials = 48;
  o.per_round = 16;
  o.min_model_samples = 1000;  // analytic ranking throughout: the test is about bookkeeping
  o.evolution.population = 64;
  o.evolution.generations = 2;
  o.hardware = testing::synthetic_hw();
  o.seed = 3;
  return o;
}

TEST(SearchResume, RestoredTrialsCountAndAreNeverMeasuredAgain) {
  const tune::Task task = gemm_task(64, 48, 64);
  SearchOptions o = small_options();
  o.initial = {task.default_schedule()};
  cost::RandomModel model(1);

  // The first search runs two of its three rounds, then "dies".
  TaskSearcher first(task, o);
  CountingMeasure m1;
  cost::TrainingSet data1;
  ASSERT_EQ(first.round(std::ref(m1), model, data1), 16);
  ASSERT_EQ(first.round(std::ref(m1), model, data1), 16);
  std::vector<Trial> earlier = first.result().trials;
  double earlier_best = first.result().best_ms;
  earlier.push_back(earlier.front());  // a duplicate counts once

  TaskSearcher second(task, o);
  cost::TrainingSet data2;
  EXPECT_EQ(second.restore(earlier, data2), 32);
  EXPECT_EQ(second.result().restored, 32);
  EXPECT_EQ(data2.size(), 32u) << "restored trials join the training set";
  EXPECT_EQ(second.next_round(), 2);
  ASSERT_TRUE(second.result().found);
  EXPECT_EQ(second.result().best_ms, earlier_best) << "the best restored is the best so far";
  EXPECT_FALSE(second.done());

  CountingMeasure m2;
  while (!second.done() && second.round(std::ref(m2), model, data2) > 0) {
  }
  EXPECT_EQ(m2.calls, 1);
  EXPECT_EQ(m2.keys.size(), 16u) << "only what the budget has left";
  std::unordered_set<std::string> all(m1.keys.begin(), m1.keys.end());
  for (const std::string& k : m2.keys) EXPECT_TRUE(all.insert(k).second) << "measured again";
  const tune::search::SearchResult& r = second.result();
  ASSERT_EQ(r.trials.size(), 48u);
  EXPECT_EQ(r.trials[0].picked_by, "restored");
  EXPECT_EQ(r.trials[47].round, 2) << "rounds are numbered on";
  EXPECT_EQ(data2.size(), 48u);
  double best = earlier_best;
  for (const Trial& t : r.trials) {
    if (t.result.ok) best = std::min(best, t.result.median_ms);
  }
  EXPECT_EQ(r.best_ms, best);
  EXPECT_THROW(second.restore(earlier, data2), std::exception) << "only before the first round";
}

// Measures with fake_result; throws ("the process died") once it has measured `die_after`
// batches. Records what it measured.
class FakeRunner : public tune::Runner {
 public:
  explicit FakeRunner(int die_after) : die_after_(die_after) {}
  std::string name() const override { return "fake"; }
  std::unique_ptr<tune::TaskRunner> open(const tune::Task&) override {
    return std::make_unique<Open>(this);
  }
  std::vector<std::string> measured;  // stages_text of every schedule measured

 private:
  struct Open : tune::TaskRunner {
    explicit Open(FakeRunner* r) : runner(r) {}
    std::vector<CandidateResult> measure(const std::vector<KernelSchedule>& batch) override {
      if (runner->batches_++ == runner->die_after_) throw std::runtime_error("killed");
      std::vector<CandidateResult> out;
      for (const KernelSchedule& s : batch) {
        runner->measured.push_back(s.stages_text());
        out.push_back(fake_result(s));
      }
      return out;
    }
    FakeRunner* runner;
  };
  int die_after_;
  int batches_ = 0;
};

TEST(SearchResume, CompileResumesALoggedSearchWithoutMeasuringAgain) {
  // 128x256x128: enough summation work for the policy to tune it.
  ir::Tensor a = ir::placeholder("A", testing::dims({128, 256}));
  ir::Tensor b = ir::placeholder("B", testing::dims({256, 128}));
  ir::Tensor c = ops::matmul(a, b);
  db::RecordsDB records = db::RecordsDB::open(":memory:");
  compiler::CompileRequest req;
  req.tune = compiler::TuneMode::kSearch;
  req.records = &records;
  req.trials = 24;
  req.search_per_round = 8;

  auto dying = std::make_shared<FakeRunner>(1);
  req.runner = dying;
  compiler::CompileResult r1 = compiler::compile({c}, {a, b}, req);
  EXPECT_EQ(r1.report.source, "rules") << r1.report.note;  // the search failed
  ASSERT_EQ(dying->measured.size(), 8u);
  const db::WorkloadKey key = db::make_workload_key({c}, {a, b});
  EXPECT_EQ(records.measurements(key, "search").size(), 8u) << "logged as measured";
  EXPECT_FALSE(records.best(key).has_value()) << "no record of an unfinished search";

  auto healthy = std::make_shared<FakeRunner>(-1);
  req.runner = healthy;
  compiler::CompileResult r2 = compiler::compile({c}, {a, b}, req);
  EXPECT_EQ(r2.report.tuner, "search");
  EXPECT_NE(r2.report.note.find("resumed from 8"), std::string::npos) << r2.report.note;
  // The 16 trials left, all new; then the final race: finalists measured before and the rules'.
  const size_t after_r2 = healthy->measured.size();
  ASSERT_GE(after_r2, 16u + 2);
  ASSERT_LE(after_r2, 16u + 5);
  std::set<std::string> all(dying->measured.begin(), dying->measured.end());
  for (size_t i = 0; i < 16; ++i) EXPECT_TRUE(all.insert(healthy->measured[i]).second);
  for (size_t i = 16; i < after_r2; ++i) EXPECT_TRUE(all.count(healthy->measured[i]));
  EXPECT_EQ(r2.report.trials, 24);
  ASSERT_EQ(r2.report.candidates.size(), 24u);
  int chosen = 0;
  for (const compiler::CandidateReport& cr : r2.report.candidates) chosen += cr.chosen;
  EXPECT_EQ(chosen, 1);
  const std::vector<db::Measurement> log = records.measurements(key, "search");
  ASSERT_EQ(log.size(), 24u);
  std::set<std::string> logged;
  for (size_t i = 0; i < log.size(); ++i) {
    logged.insert(log[i].schedule_json);
    EXPECT_EQ(log[i].trial, static_cast<int>(i));
  }
  EXPECT_EQ(logged.size(), 24u);
  ASSERT_NE(r2.kernel, nullptr) << "a restored winner is built by the compile call";
  ASSERT_TRUE(records.best(key).has_value());

  compiler::CompileResult r3 = compiler::compile({c}, {a, b}, req);
  EXPECT_EQ(r3.report.source, "records");
  EXPECT_EQ(healthy->measured.size(), after_r2);
}

}  // namespace
}  // namespace tessera
