// DietCode tuning end to end, timing-free: a model timer (a known throughput per micro-kernel and
// a known wave weight) stands in for the clock, so the tests check that tuning recovers the
// model's constants, selects within its bounds, dispatches every size to a kernel near that
// size's best, and that a second process takes the selection from the records database without
// tuning. One smoke test runs the real timer (no assertion on its numbers).
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "dynamic_check.h"
#include "runtime/parallel.h"
#include "schedule/default_schedule.h"
#include "synthetic_hw.h"
#include "temp_dir.h"
#include "tune/dynamic/selection_records.h"
#include "tune/dynamic/tune_dynamic.h"
#include "util/check.h"

namespace tessera::tune::dynamic {
namespace {

// Pins the thread pool (wave ratios depend on it) for one test.
class PinThreads {
 public:
  explicit PinThreads(int n) { runtime::set_num_threads(n); }
  ~PinThreads() { runtime::set_num_threads(0); }
};

constexpr double kTrueWaveK = 0.7;

// The model's throughput of a micro-kernel: a fixed function of its schedule text.
double model_throughput(const schedule::KernelSchedule& s) {
  return 1000.0 * (1.0 + 0.1 * static_cast<double>(std::hash<std::string>()(s.stages_text()) % 7));
}

// Its per-call overhead: parallel micro-kernels pay for waking the pool.
double model_overhead(const schedule::KernelSchedule& s) {
  return s.stages[0].parallel ? 0.02 : 0.001;
}

// A pool round trip (ms) that is a third of the smallest instance's least time in that model
// (3 ms at T = 1): serial copies are worth trying there.
constexpr double kSlowPoolCallMs = 1.0;

// The model's time of `k` at `p`. With `parallel_speedup` above 1, a parallel micro-kernel's
// throughput is that many times its schedule text's (as the pool's threads give a real one).
double model_ms(const DynamicWorkload& w, const compiler::BuiltKernel& k, const SizePoint& p,
                double wave_k = kTrueWaveK, double parallel_speedup = 1) {
  const MicroKernelGeometry g = geometry_of(k.plan(), k.schedule(), w.size_map(w.largest()));
  const double speedup = k.schedule().stages[0].parallel ? parallel_speedup : 1;
  return predict_ms(instance_shape(g, w.size_map(p), runtime::get_num_threads()),
                    {speedup * model_throughput(k.schedule()), model_overhead(k.schedule()), {}},
                    wave_k);
}

DynamicTuneOptions fast_options() {
  DynamicTuneOptions o;
  o.representatives = 2;
  o.construct.predict_only = true;
  o.construct.top_k = 3;
  o.construct.chains = 4;
  o.construct.hardware = testing::synthetic_hw();
  return o;
}

TEST(DynamicTune, RepresentativesAndTileMutations) {
  testing::DynamicDense d(4, 1, 40);
  const DynamicWorkload w = d.workload();
  // The largest first, the smallest last, evenly between.
  EXPECT_EQ(representative_points(w, 3), (std::vector<SizePoint>{{40}, {20}, {1}}));
  EXPECT_EQ(representative_points(w, 2), (std::vector<SizePoint>{{40}, {1}}));
  EXPECT_EQ(representative_points(w, 1), (std::vector<SizePoint>{{40}}));
  // Mutations halve or double the cache tile of the dynamic axis only, keeping mid tiles whole.
  const schedule::StagePlan plan = schedule::plan_stages(w.outputs(), w.inputs());
  const schedule::KernelSchedule rules = schedule::default_schedule(plan, schedule::Target::host());
  const std::vector<schedule::KernelSchedule> muts = tile_mutations(plan, rules, w.size_map({40}));
  ASSERT_FALSE(muts.empty());
  const std::vector<int64_t>& t = rules.stages[0].tile_outer;
  for (const schedule::KernelSchedule& m : muts) {
    const std::vector<int64_t>& mt = m.stages[0].tile_outer;
    EXPECT_TRUE(mt[0] == 2 * t[0] || 2 * mt[0] == t[0]) << m.dump();
    EXPECT_EQ(mt[1], t[1]);
    const std::vector<int64_t> mid = m.stages[0].mid_tiles();
    EXPECT_EQ(mt[0] % mid[0], 0);
    EXPECT_EQ(mid[0] % m.stages[0].tile_reg[0], 0);
  }
  // A static workload has no dynamic axis to adapt.
  const DagCopy inst = w.instantiate({40});
  const schedule::StagePlan splan = schedule::plan_stages(inst.outputs, inst.inputs);
  EXPECT_TRUE(tile_mutations(splan, schedule::default_schedule(splan, schedule::Target::host()), {})
                  .empty());
}

TEST(DynamicTune, CandidatesAreCheckedWhereTheirTilesAndEdgesAllRun) {
  testing::DynamicDense d(1, 1, 256);  // rows = T in 1..256
  const DynamicWorkload w = d.workload();
  const std::vector<SizePoint> points = sample_points(w, 256);
  const schedule::StagePlan plan = schedule::plan_stages(w.outputs(), w.inputs());
  MicroKernelGeometry g = geometry_of(
      plan, schedule::default_schedule(plan, schedule::Target::host()), w.size_map({256}));
  ASSERT_EQ(g.extents.size(), 2u);
  ASSERT_FALSE(g.extents[0]->is_const_int());
  auto with_tiles = [&](int64_t tile, int64_t granule) {
    g.tiles[0] = tile;
    g.granules[0] = granule;
    return verification_points(points, g, w);
  };
  // Two whole 16-row tiles and a cut one, cut inside a 4-row register tile: 33 rows.
  EXPECT_EQ(with_tiles(16, 4), (std::vector<SizePoint>{{1}, {33}}));
  EXPECT_EQ(with_tiles(16, 1), (std::vector<SizePoint>{{1}, {33}}));
  EXPECT_EQ(with_tiles(5, 5), (std::vector<SizePoint>{{1}, {11}}));
  // One-row tiles have no edge: three rows run the first tile and the steps between tiles.
  EXPECT_EQ(with_tiles(1, 1), (std::vector<SizePoint>{{1}, {3}}));
  // Tiles too large for that below the middle of the range: the middle, odd.
  EXPECT_EQ(with_tiles(128, 8), (std::vector<SizePoint>{{1}, {129}}));
}

TEST(DynamicTune, ModelTimerRecoversTheModelAndSelectsWithinBounds) {
  PinThreads pin(4);
  testing::DynamicDense d(4, 1, 40);
  const DynamicWorkload w = d.workload();
  DynamicTuneOptions o = fast_options();
  o.timer = [&](size_t, const compiler::BuiltKernel& k, const SizePoint& p) {
    return model_ms(w, k, p);
  };
  o.pool_call_ms = kSlowPoolCallMs;
  const DynamicTuneResult r = tune_dynamic(w, o);
  EXPECT_FALSE(r.from_records);
  ASSERT_TRUE(r.kernel);
  EXPECT_NEAR(r.selection.wave_k, kTrueWaveK, 1e-6);
  // Every verified candidate's throughput is the model's; candidates beyond the rules' include
  // construct mode's and the tile mutations.
  int constructed = 0, mutated = 0, serial = 0, at_smallest = 0;
  for (const CandidateReport& c : r.candidates) {
    at_smallest += c.origin == "construct@1";  // the smallest representative's proposals
    EXPECT_TRUE(c.ok) << c.origin << ": " << c.error;
    if (c.ok) {
      EXPECT_NEAR(c.model.throughput / model_throughput(c.schedule), 1.0, 1e-9) << c.origin;
      EXPECT_NEAR(c.model.overhead_ms, model_overhead(c.schedule), 1e-9) << c.origin;
    }
    constructed += c.origin.rfind("construct@", 0) == 0;
    mutated += c.origin == "mutation";
    serial += c.origin == "serial";
  }
  EXPECT_GT(constructed, 0);
  EXPECT_GT(at_smallest, 0);
  EXPECT_GT(mutated, 0);
  EXPECT_EQ(serial, DynamicTuneOptions{}.serial_variants);
  EXPECT_EQ(r.selection.candidates, static_cast<int>(r.candidates.size()));
  EXPECT_GE(r.selection.schedules.size(), 1u);
  EXPECT_LE(static_cast<int>(r.selection.schedules.size()), o.selection.max_kernels);
  EXPECT_LE(r.selection.predicted_loss, o.selection.loss_bound + 1e-12);
  EXPECT_LE(r.selection.worst_point_loss, o.selection.point_loss_bound + 1e-12);
  // Independently of the selection's own numbers: every size runs a kernel whose model time is
  // within the per-point bound of the best unpruned candidate's model time.
  ASSERT_EQ(r.points.size(), 40u);
  std::vector<compiler::BuiltKernel> unpruned;
  for (const CandidateReport& c : r.candidates) {
    if (!c.ok || c.pruned) continue;
    compiler::BuildOptions bo;
    bo.schedule = c.schedule;
    unpruned.push_back(compiler::build_cpu(w.outputs(), w.inputs(), bo));
  }
  for (int64_t t = 1; t <= 40; ++t) {
    double best = 1e300;
    for (const compiler::BuiltKernel& k : unpruned) best = std::min(best, model_ms(w, k, {t}));
    const int k = r.kernel->dispatch(&t);
    ASSERT_GE(k, 0);
    EXPECT_EQ(k, r.assignment[t - 1]);
    EXPECT_LE(model_ms(w, r.kernel->kernel(k), {t}),
              best * (1 + o.selection.point_loss_bound) + 1e-12)
        << "T = " << t;
  }
  // The tuned kernel is right at every size, and outside the range.
  for (int64_t t : {1, 2, 3, 7, 16, 21, 33, 39, 40, 41, 0}) {
    testing::expect_runs_like_reference(
        w, {t}, [&](const std::vector<void*>& b, const SizePoint& s) { r.kernel->run(b, s); });
  }
}

// Tunes `w` on `max_points` sample points in the model (model_ms's `parallel_speedup`) with the
// loss bounds at 0 (each sample's best kernel is kept, so several are selected), timing-free.
DynamicTuneResult tune_keeping_each_samples_best(const DynamicWorkload& w, int64_t max_points,
                                                 double parallel_speedup = 1) {
  DynamicTuneOptions o = fast_options();
  o.max_points = max_points;
  o.selection.loss_bound = o.selection.point_loss_bound = 0;
  o.timer = [&](size_t, const compiler::BuiltKernel& k, const SizePoint& p) {
    return model_ms(w, k, p, kTrueWaveK, parallel_speedup);
  };
  o.pool_call_ms = kSlowPoolCallMs;
  return tune_dynamic(w, o);
}

// The kernel dispatched at `p` has the least model time of the selected kernels there.
void expect_dispatches_the_fastest_selected(const DynamicTuneResult& r, const DynamicWorkload& w,
                                            const SizePoint& p, double parallel_speedup = 1) {
  const double k = r.selection.wave_k;
  double best = std::numeric_limits<double>::infinity();
  for (size_t j = 0; j < r.kernel->num_kernels(); ++j) {
    best = std::min(best, model_ms(w, r.kernel->kernel(j), p, k, parallel_speedup));
  }
  const int got = r.kernel->dispatch(p.data());
  ASSERT_GE(got, 0);
  EXPECT_LE(model_ms(w, r.kernel->kernel(got), p, k, parallel_speedup), best * (1 + 1e-9))
      << "at sizes " << ::testing::PrintToString(p);
}

// With few sample points, most sizes lie between two; the dispatcher still runs each size on the
// selected kernel predicted fastest there (sizes between samples can fall on another side of a
// register tile's edge than both neighbours).
TEST(DynamicTune, EverySizeOfOneAxisRunsTheSelectedKernelPredictedFastestThere) {
  testing::DynamicDense d(3, 1, 120);
  const DynamicWorkload w = d.workload();
  const DynamicTuneResult r = tune_keeping_each_samples_best(w, 6);
  ASSERT_TRUE(r.kernel);
  ASSERT_EQ(r.points.size(), 6u);
  ASSERT_GE(r.kernel->num_kernels(), 2u) << "one kernel cannot show the dispatch between samples";
  int between_samples = 0;
  for (int64_t t = 1; t <= 120; ++t) {
    expect_dispatches_the_fastest_selected(r, w, {t});
    between_samples += std::find(r.points.begin(), r.points.end(), SizePoint{t}) == r.points.end();
  }
  EXPECT_EQ(between_samples, 114);
}

// The same over two axes (rows = B x T): every point of a small box is dispatched by its own
// prediction, not by the nearest sample point's label. Parallel micro-kernels run at the two
// threads' rate here, so a serial one (no pool wake-up, no padded rows) wins on the fewest rows
// and a parallel one on the most, whatever the host's lane count makes the candidates: with
// the schedule text's rate alone, one unpadded serial candidate of the best rate was the fastest
// at every size on AVX2 (one kernel selected).
TEST(DynamicTune, EveryPointOfASmallBoxRunsTheSelectedKernelPredictedFastestThere) {
  constexpr int kThreads = 2;
  PinThreads pin(kThreads);
  ir::Var b = ir::size_var("B", 1, 4), t = ir::size_var("T", 1, 40);
  ir::Tensor x = ir::placeholder("X", {ir::mul(b, t), ir::int_imm(24)});
  ir::Tensor w = ir::placeholder("W", {ir::int_imm(64), ir::int_imm(24)});
  const DynamicWorkload wl = DynamicWorkload::create({ops::dense(x, w)}, {x, w}, "dense");
  const DynamicTuneResult r = tune_keeping_each_samples_best(wl, 16, kThreads);  // a 4 x 4 grid
  ASSERT_TRUE(r.kernel);
  ASSERT_EQ(r.points.size(), 16u);
  ASSERT_GE(r.kernel->num_kernels(), 2u) << "one kernel cannot show the dispatch between samples";
  EXPECT_EQ(r.selection.dispatcher.axes(), 2u);
  for (int64_t bv = 1; bv <= 4; ++bv) {
    for (int64_t tv = 1; tv <= 40; ++tv) {
      expect_dispatches_the_fastest_selected(r, wl, {bv, tv}, kThreads);
    }
  }
}

// Under search mode (search_trials), search tunes the largest instance and its choice is one of
// the candidates DietCode builds, verifies and times; without it no search runs.
TEST(DynamicTune, SearchModesChoiceOnTheLargestInstanceIsACandidate) {
  testing::DynamicDense d(1, 1, 200, 64, 768);
  const DynamicWorkload w = d.workload({1});
  DynamicTuneOptions o = fast_options();
  o.timer = [&](size_t, const compiler::BuiltKernel& k, const SizePoint& p) {
    return model_ms(w, k, p);
  };
  EXPECT_FALSE(tune_dynamic(w, o).searched);
  o.search_trials = 8;
  const DynamicTuneResult r = tune_dynamic(w, o);
  ASSERT_TRUE(r.searched);
  EXPECT_EQ(r.search_measured, 8);
  schedule::KernelSchedule searched = *r.searched;
  for (schedule::StageAnnotation& st : searched.stages) st.edge = *o.edge;  // as candidates run
  int found = 0;
  for (const CandidateReport& c : r.candidates) {
    found += c.ok && c.schedule.stages_text() == searched.stages_text();
  }
  EXPECT_EQ(found, 1);
}

TEST(DynamicTune, TheRulesOfTheSizesThatHoldTheMostWorkAreCandidates) {
  testing::DynamicDense d(1, 1, 200, 64, 768);
  const DynamicWorkload w = d.workload({1});
  const std::vector<schedule::KernelSchedule> voted = rules_by_vote(w, 16, 2);
  // The tally, independently: each of the 16 spread sizes' rules, weighted by its rows.
  std::map<std::string, double> tally;
  for (const SizePoint& p : sample_points(w, 16)) {
    const DagCopy inst = w.instantiate(p);
    Task task = Task::create(inst.outputs, inst.inputs, "check");
    task.constant_inputs = {"W"};
    tally[task.default_schedule().stages_text()] += static_cast<double>(p[0]);
  }
  ASSERT_GE(tally.size(), 2u) << "the rules should differ between sizes of this range";
  ASSERT_EQ(voted.size(), 2u);
  EXPECT_NE(voted[0].stages_text(), voted[1].stages_text());
  for (const schedule::KernelSchedule& s : voted) {
    ASSERT_TRUE(tally.count(s.stages_text())) << s.dump();
  }
  EXPECT_GE(tally[voted[0].stages_text()], tally[voted[1].stages_text()]);
  for (const auto& [text, votes] : tally) {
    if (text != voted[0].stages_text()) {
      EXPECT_GE(tally[voted[1].stages_text()], votes);
    }
  }
  // In tuning they join the candidates (unless another origin proposed the same schedule).
  DynamicTuneOptions o = fast_options();
  o.timer = [&](size_t, const compiler::BuiltKernel& k, const SizePoint& p) {
    return model_ms(w, k, p);
  };
  std::set<std::string> proposed;
  for (const CandidateReport& c : tune_dynamic(w, o).candidates) {
    proposed.insert(c.schedule.stages_text());
  }
  for (schedule::KernelSchedule s : voted) {
    for (schedule::StageAnnotation& st : s.stages) st.edge = *o.edge;
    EXPECT_TRUE(proposed.count(s.stages_text())) << s.dump();
  }
}

TEST(DynamicTune, TheTwoFastestAtTheLargestAreTimedThere) {
  PinThreads pin(4);
  testing::DynamicDense d(4, 1, 40);
  const DynamicWorkload w = d.workload();
  DynamicTuneOptions o = fast_options();
  // Partial waves cost what full ones do (the wave weight before its fit): the contenders are
  // chosen before the fit, by predictions that are then exact.
  const double k_default = o.cost.default_wave_k;
  std::set<std::string> timed_at_largest;
  o.timer = [&](size_t, const compiler::BuiltKernel& k, const SizePoint& p) {
    if (p == w.largest()) timed_at_largest.insert(k.schedule().stages_text());
    return model_ms(w, k, p, k_default);
  };
  const DynamicTuneResult r = tune_dynamic(w, o);
  // The unpruned candidates (serial copies come later) by model time at the largest size: the
  // two fastest were timed there (whatever their calibration points).
  std::vector<std::pair<double, std::string>> order;
  for (const CandidateReport& c : r.candidates) {
    if (!c.ok || c.pruned || c.origin == "serial") continue;
    compiler::BuildOptions bo;
    bo.schedule = c.schedule;
    const compiler::BuiltKernel k = compiler::build_cpu(w.outputs(), w.inputs(), bo);
    order.push_back({model_ms(w, k, w.largest(), k_default), c.schedule.stages_text()});
  }
  std::sort(order.begin(), order.end());
  ASSERT_GE(order.size(), 2u);
  EXPECT_TRUE(timed_at_largest.count(order[0].second)) << order[0].second;
  EXPECT_TRUE(timed_at_largest.count(order[1].second)) << order[1].second;
}

// Serial copies join only where the pool's round trip is a noticeable share of the best
// predicted time: with a round trip far below every instance's time, none is built.
TEST(DynamicTune, SerialCopiesJoinOnlyWhereThePoolsRoundTripShows) {
  PinThreads pin(4);
  testing::DynamicDense d(4, 1, 40);
  const DynamicWorkload w = d.workload();
  auto serial_copies = [&](double pool_call_ms) {
    DynamicTuneOptions o = fast_options();
    o.timer = [&](size_t, const compiler::BuiltKernel& k, const SizePoint& p) {
      return model_ms(w, k, p);
    };
    o.pool_call_ms = pool_call_ms;
    int serial = 0;
    for (const CandidateReport& c : tune_dynamic(w, o).candidates) serial += c.origin == "serial";
    return serial;
  };
  EXPECT_EQ(serial_copies(1e-3), 0);  // 1 us against at least 3 ms
  EXPECT_EQ(serial_copies(kSlowPoolCallMs), DynamicTuneOptions{}.serial_variants);
}

TEST(DynamicTune, ASecondProcessTakesTheSelectionFromRecords) {
  PinThreads pin(4);
  testing::TempDir dir("tessera-dynamic-test");
  testing::DynamicDense d(4, 1, 40);
  const DynamicWorkload w = d.workload();
  DynamicTuneResult first;
  {
    db::RecordsDB records = db::RecordsDB::open(dir.file("records.db"));
    DynamicTuneOptions o = fast_options();
    o.timer = [&](size_t, const compiler::BuiltKernel& k, const SizePoint& p) {
      return model_ms(w, k, p);
    };
    o.records = &records;
    first = tune_dynamic(w, o);
    EXPECT_FALSE(first.from_records);
    EXPECT_GT(first.timings, 0);
  }
  // Another database object on the same file (as another process opens it), and the same
  // workload built again under other names: the stored selection serves it, nothing is timed.
  testing::DynamicDense renamed(4, 1, 40, 24, 40, "other_");
  const DynamicWorkload w2 = renamed.workload();
  db::RecordsDB records = db::RecordsDB::open(dir.file("records.db"));
  DynamicTuneOptions o = fast_options();
  o.records = &records;
  o.construct_candidates = false;
  o.timer = [](size_t, const compiler::BuiltKernel&, const SizePoint&) -> double {
    ADD_FAILURE() << "a stored selection was tuned again";
    return 1;
  };
  const DynamicTuneResult second = tune_dynamic(w2, o);
  EXPECT_TRUE(second.from_records);
  EXPECT_EQ(second.timings, 0);
  ASSERT_EQ(second.selection.schedules.size(), first.selection.schedules.size());
  for (size_t i = 0; i < first.selection.schedules.size(); ++i) {
    // Same tiles, the new workload's op names.
    EXPECT_EQ(second.selection.schedules[i].stages[0].tile_outer,
              first.selection.schedules[i].stages[0].tile_outer);
    EXPECT_EQ(second.selection.schedules[i].stages[0].op, "other_dense");
  }
  for (int64_t t = -1; t <= 45; ++t) {
    EXPECT_EQ(second.kernel->dispatch(&t), first.kernel->dispatch(&t)) << "T = " << t;
  }
  for (int64_t t : {1, 5, 22, 40, 44}) {
    testing::expect_runs_like_reference(
        w2, {t},
        [&](const std::vector<void*>& b, const SizePoint& s) { second.kernel->run(b, s); });
  }
  // Another range is another workload: no record for it.
  testing::DynamicDense wider(4, 1, 80);
  EXPECT_FALSE(load_selection(records, wider.workload()).has_value());
  // A deeper tuning (search mode's candidates) is not answered by this selection.
  EXPECT_TRUE(load_selection(records, w2).has_value());
  EXPECT_FALSE(load_selection(records, w2, /*search_trials=*/64).has_value());
}

// A constant weight: candidates are built, checked and timed reading it packed, the selected
// kernel runs from its packed argument, and the selection is filed apart from the plain one.
TEST(DynamicTune, ConstantWeightsAreTunedAndRunPacked) {
  PinThreads pin(4);
  testing::TempDir dir("tessera-dynamic-test");
  testing::DynamicDense d(4, 1, 40);
  const DynamicWorkload w = d.workload({1});
  db::RecordsDB records = db::RecordsDB::open(dir.file("records.db"));
  DynamicTuneOptions o = fast_options();
  int timed_packed = 0;
  o.timer = [&](size_t, const compiler::BuiltKernel& k, const SizePoint& p) {
    timed_packed += !k.prepacks().empty();
    return model_ms(w, k, p);
  };
  o.records = &records;
  const DynamicTuneResult r = tune_dynamic(w, o);
  EXPECT_GT(timed_packed, 0) << "no candidate read W packed";
  for (const CandidateReport& c : r.candidates) EXPECT_TRUE(c.ok) << c.origin << ": " << c.error;
  EXPECT_FALSE(r.kernel->packed_constants().empty());
  for (int64_t t : {1, 2, 9, 20, 39, 40, 41, 60}) {
    testing::expect_runs_like_reference(w, {t}, testing::packed_run(*r.kernel, w));
  }
  EXPECT_TRUE(load_selection(records, w).has_value());
  EXPECT_FALSE(load_selection(records, d.workload()).has_value());
}

TEST(DynamicTune, TwoDynamicAxesGetADecisionTree) {
  PinThreads pin(2);
  ir::Var m = ir::size_var("M", 1, 40), n = ir::size_var("N", 8, 64);
  ir::Tensor a = ir::placeholder("A", {m, ir::int_imm(16)});
  ir::Tensor b = ir::placeholder("B", {ir::int_imm(16), n});
  ir::Tensor c = ops::matmul(a, b);
  const DynamicWorkload w = DynamicWorkload::create({c}, {a, b}, "mm");
  DynamicTuneOptions o = fast_options();
  o.max_points = 64;
  o.timer = [&](size_t, const compiler::BuiltKernel& k, const SizePoint& p) {
    return model_ms(w, k, p);
  };
  const DynamicTuneResult r = tune_dynamic(w, o);
  EXPECT_EQ(r.selection.dispatcher.axes(), 2u);
  ASSERT_LE(r.points.size(), 64u);
  for (size_t i = 0; i < r.points.size(); ++i) {
    EXPECT_EQ(r.kernel->dispatch(r.points[i].data()), r.assignment[i]);
  }
  for (const SizePoint& p : std::vector<SizePoint>{{1, 8}, {13, 27}, {40, 64}, {41, 8}, {5, 7}}) {
    testing::expect_runs_like_reference(
        w, p, [&](const std::vector<void*>& bufs, const SizePoint& s) { r.kernel->run(bufs, s); });
  }
}

TEST(DynamicTune, MicroKernelsUseTheEdgeModeAsked) {
  // Rows 3 T: register tiles of 2, 4, 8... rows are cut at most sizes.
  PinThreads pin(2);
  testing::DynamicDense d(3, 1, 20);
  const DynamicWorkload w = d.workload();
  const auto edges_of = [](const schedule::KernelSchedule& s) {
    std::set<schedule::EdgeMode> e;
    for (const schedule::StageAnnotation& st : s.stages) e.insert(st.edge);
    return e;
  };
  using E = schedule::EdgeMode;
  for (std::optional<E> asked :
       std::vector<std::optional<E>>{std::nullopt, E::kSplit, E::kLocalPad}) {
    DynamicTuneOptions o = fast_options();
    o.edge = asked;
    o.timer = [&](size_t, const compiler::BuiltKernel& k, const SizePoint& p) {
      return model_ms(w, k, p);
    };
    const DynamicTuneResult r = tune_dynamic(w, o);
    ASSERT_TRUE(r.kernel);
    // Candidates carry the edge mode asked. nullopt: their own, which is local padding for the
    // rules' schedule of the symbolic DAG and splitting for those made on static instances.
    const auto want_of = [&](const CandidateReport& c) {
      if (asked) return std::set<E>{*asked};
      return std::set<E>{c.origin == "rules" ? E::kLocalPad : E::kSplit};
    };
    for (const CandidateReport& c : r.candidates) {
      EXPECT_TRUE(c.ok) << c.origin << ": " << c.error;
      EXPECT_EQ(edges_of(c.schedule), want_of(c)) << c.origin << ": " << c.schedule.dump();
    }
    for (size_t k = 0; k < r.kernel->num_kernels(); ++k) {
      const std::set<E> edges = edges_of(r.kernel->kernel(k).schedule());
      if (asked) {
        EXPECT_EQ(edges, std::set<E>{*asked});
      }
    }
    for (int64_t t : {1, 2, 3, 5, 7, 13, 19, 20, 23}) {
      testing::expect_runs_like_reference(
          w, {t}, [&](const std::vector<void*>& b, const SizePoint& s) { r.kernel->run(b, s); });
    }
  }
  EXPECT_EQ(DynamicTuneOptions{}.edge, std::optional<E>(E::kLocalPad)) << "the default";
}

TEST(DynamicTune, RealTimerSmoke) {
  testing::DynamicDense d(2, 1, 12, 16, 24);
  const DynamicWorkload w = d.workload();
  DynamicTuneOptions o = fast_options();
  o.representatives = 1;
  o.timing.min_time_ms = 0.05;
  o.timing.min_repeats = 1;
  o.timing.max_repeats = 2;
  const DynamicTuneResult r = tune_dynamic(w, o);
  EXPECT_GT(r.timings, 0);
  EXPECT_GE(r.selection.wave_k, 0.0);
  EXPECT_LE(r.selection.wave_k, 1.0);
  for (int64_t t = 0; t <= 14; ++t) {
    testing::expect_runs_like_reference(
        w, {t}, [&](const std::vector<void*>& b, const SizePoint& s) { r.kernel->run(b, s); });
  }
}

}  // namespace
}  // namespace tessera::tune::dynamic
