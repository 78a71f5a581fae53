// Search overhead per round at Ansor's population (2048, 4 generations) and at 512, with the
// analytic ranker and with a trained XGBoost model, on GEMM 1024 and a ResNet res3 3x3 conv;
// next to the time the candidate measurer takes for a batch of real candidates. Disabled by
// default (timing, not correctness):
//   tessera_tests --gtest_also_run_disabled_tests --gtest_filter='*SearchOverhead*'
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>

#include "const_dims.h"
#include "cost/xgb_model.h"
#include "ops/ops.h"
#include "tune/gensor/construct.h"
#include "tune/search/evolution.h"

namespace tessera::tune::search {
namespace {

using ir::Tensor;
using schedule::KernelSchedule;
using testing::dims;

// Every candidate "runs" in 1 ms: only the search's own cost is of interest here.
std::vector<CandidateResult> instant(const std::vector<KernelSchedule>& batch) {
  std::vector<CandidateResult> out(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    out[i].ok = true;
    out[i].median_ms = 1.0 + 0.001 * static_cast<double>(i % 7);
  }
  return out;
}

void report(const char* what, const SearchStats& s, int rounds) {
  std::printf(
      "%-34s per round: overhead %.2f s (evolve %.2f, sample %.2f, lower %.2f, features %.2f, "
      "predict %.2f, train %.2f), scored %d\n",
      what, s.overhead_s() / rounds, s.evolve_s / rounds, s.sample_s / rounds, s.lower_s / rounds,
      s.feature_s / rounds, s.predict_s / rounds, s.train_s / rounds, s.scored / rounds);
}

void bench(const std::string& name, const Task& task) {
  for (int population : {2048, 512}) {
    SearchOptions o;
    o.trials = 64 * 3;
    o.per_round = 64;
    o.min_model_samples = 64;
    o.evolution.population = population;
    cost::XGBOptions xo;
    xo.threads = 1;
    cost::XGBModel model(xo);
    cost::TrainingSet data;
    TaskSearcher searcher(task, o);
    // Round 1 ranks analytically; rounds 2 and 3 with the model trained after round 1 and 2.
    searcher.round(instant, model, data);
    SearchStats first = searcher.result().stats;
    searcher.round(instant, model, data);
    searcher.round(instant, model, data);
    SearchStats learned = searcher.result().stats;
    const std::string label = name + " pop " + std::to_string(population);
    report((label + " analytic").c_str(), first, 1);
    SearchStats diff = learned;
    diff.evolve_s -= first.evolve_s;
    diff.sample_s -= first.sample_s;
    diff.lower_s -= first.lower_s;
    diff.feature_s -= first.feature_s;
    diff.predict_s -= first.predict_s;
    diff.train_s -= first.train_s;
    diff.total_s -= first.total_s;
    diff.measure_s -= first.measure_s;
    diff.scored -= first.scored;
    report((label + " xgboost").c_str(), diff, 2);
  }
  // The measurer on 16 real candidates of the space, for scale.
  SearchSpace space(task);
  std::mt19937_64 rng(1);
  std::vector<KernelSchedule> cands;
  for (int i = 0; i < 16; ++i) cands.push_back(space.sample(rng));
  CandidateMeasurer measurer(task);
  const auto t0 = std::chrono::steady_clock::now();
  measurer.measure_all(cands);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%-34s measure_all of 16 random candidates: %.2f s (%.3f s each)\n", name.c_str(), s,
              s / 16);
}

TEST(SearchBench, DISABLED_SearchOverhead) {
  Tensor a = ir::placeholder("A", dims({1024, 1024})), b = ir::placeholder("B", dims({1024, 1024}));
  bench("gemm1024", Task::create({ops::matmul(a, b)}, {a, b}, "gemm1024"));
  Tensor x = ir::placeholder("X", dims({1, 128, 28, 28})),
         w = ir::placeholder("W", dims({128, 128, 3, 3}));
  bench("res3_3x3", Task::create({ops::conv2d(x, w, nullptr, {1, 1}, {1, 1})}, {x, w}, "res3"));
}

// Construct mode, then a search of `trials` seeded with its candidates; both winners re-timed side
// by side at the end (one measure_all, paired rounds) so that the ratio is not a cross-run one.
void search_vs_construct(const std::string& name, const Task& task, int trials) {
  gensor::ConstructResult cr = gensor::construct(task);
  SearchOptions o;
  o.trials = trials;
  o.evolution.population = 512;
  for (const gensor::ConstructCandidate& c : cr.candidates) o.initial.push_back(c.schedule);
  CandidateMeasurer measurer(task);
  const Measure measure = [&](const std::vector<KernelSchedule>& b) {
    return measurer.measure_all(b);
  };
  cost::XGBOptions xo;
  xo.threads = 1;
  cost::XGBModel model(xo);
  SearchResult r = search_task(task, o, measure, model);
  ASSERT_TRUE(r.found);
  CandidateMeasurer final_timer(task);
  const std::vector<CandidateResult> both = final_timer.measure_all({cr.schedule, r.best});
  std::printf(
      "%-10s construct %.3f ms (%.1f s), search(%d) %.3f ms (%.1f s: measure %.1f, "
      "overhead %.1f); re-timed side by side: construct %.3f, search %.3f -> %.2fx\n",
      name.c_str(), cr.candidates[cr.chosen].result.median_ms, cr.construct_s, trials, r.best_ms,
      r.stats.total_s, r.stats.measure_s, r.stats.overhead_s(), both[0].median_ms,
      both[1].median_ms, both[0].median_ms / both[1].median_ms);
  int by_model = 0;
  for (const Trial& t : r.trials) {
    by_model += t.picked_by == "model";
    if (t.result.ok && t.result.median_ms == r.best_ms)
      std::printf("  best picked by %s in round %d\n", t.picked_by.c_str(), t.round);
  }
  std::printf("  %d of %zu trials picked by the model\n", by_model, r.trials.size());
}

TEST(SearchBench, DISABLED_SearchVsConstruct) {
  Tensor a = ir::placeholder("A", dims({256, 256})), b = ir::placeholder("B", dims({256, 256}));
  search_vs_construct("gemm256", Task::create({ops::matmul(a, b)}, {a, b}, "gemm256"), 128);
}

}  // namespace
}  // namespace tessera::tune::search
