#pragma once
// DietCode tuning of one dynamic workload, end to end:
//
//   records hit?  -> build the stored selection, no tuning
//   candidates    construct mode (Gensor, predict-only: its model ranks, we measure) on a few
//                 representative instances (default: the largest, as the paper's M0), search
//                 mode's choice on the largest when asked (search_trials), plus the paper's
//                 cache-tile mutations [T/2, 2T] on the dynamic axes of the best few
//   compile       every candidate ONCE over the symbolic sizes, the fallback (the rules'
//                 schedule over unbounded sizes) beside them; verify each candidate against the
//                 fallback at the smallest size and where its tiles and edges all run
//                 (verification_points); candidates read the constant inputs (weights) they
//                 pack prepacked, as the dynamic kernel runs them (packed_constants.h)
//   time          each micro-kernel on its fullest wave and on the smallest instance: its
//                 throughput and per-call overhead (one call on the fullest wave when that is
//                 far slower than the best so far); poor throughput pruned early; serial copies
//                 of the best few at the sizes where the pool's round trip is a noticeable
//                 share of the best predicted time join (they win where the wake-up dominates)
//   wave fit      the best micro-kernel over several wave ratios: k for this machine (kept at
//                 its default where no micro-kernel's wave ratios spread enough to tell k)
//   predict       time = overhead + work x padding x wave / throughput at every sampled size
//   select        top-k voting + greedy weighted set cover within the loss bounds
//   dispatch      interval table (one axis) / decision tree (several) over every size point
//                 of ranges whose box is small enough (DispatchConstants), each labelled with the
//                 selected kernel predicted fastest there, else over the sample points; the
//                 fallback kernel outside the ranges
//   store         the selection in the records database
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compiler/build.h"
#include "db/records.h"
#include "runtime/measure.h"
#include "schedule/annotation.h"
#include "tune/dynamic/cost_model.h"
#include "tune/dynamic/dispatcher.h"
#include "tune/dynamic/dynamic_kernel.h"
#include "tune/dynamic/selection.h"
#include "tune/dynamic/workload.h"
#include "tune/gensor/construct.h"

namespace tessera::tune::dynamic {

// Times one compiled micro-kernel at one size point (ms). Candidates are numbered in the order of
// DynamicTuneResult::candidates.
using SizeTimer =
    std::function<double(size_t candidate, const compiler::BuiltKernel& kernel, const SizePoint&)>;

// How candidates are found: construct mode's options as the compile call runs it, but
// predict-only (its candidates are measured here, on the dynamic workload) and fewer of them.
inline gensor::ConstructOptions dynamic_construct_options() {
  gensor::ConstructOptions o = gensor::policy_construct_options(0);
  o.predict_only = true;
  o.top_k = 2;
  return o;
}

struct DynamicTuneOptions {
  // Instances construct mode tunes: the largest, the smallest, evenly between. The smallest
  // brings micro-kernels of another kind (one row against a weight: a dot product per output,
  // no packing) that the largest never proposes; with it a 768x768 dense over 1..1024 rows
  // measured 1.27x per-shape tuning at 1 row instead of 0.10x.
  int representatives = 2;
  int mutate_top = 1;  // construct mode's best few get their cache tiles halved/doubled
  // Search mode's measurements on the largest instance (0: no search). Its choice joins the
  // candidates (origin "search@<sizes>") and gets the cache-tile mutations, so a user who asks
  // for deep tuning gets it on the sizes that hold the most work.
  int search_trials = 0;
  // Of search's measured candidates, this many fastest join too (its choice among them): they
  // were timed at the largest size only, and one that loses there by a little can win on fewer
  // rows or a smaller batch.
  int search_top = 4;
  // The rules' schedules at this many sizes spread over the ranges vote (by work); the first
  // rules_votes are candidates too.
  int64_t rules_vote_points = 16;
  int rules_votes = 2;
  int serial_variants = 1;  // the best few parallel micro-kernels also run serially
  // The thread pool's round trip per parallel call (ms), which a serial copy does not pay;
  // unset: measured while tuning. (Tests with a model timer set one that fits their model.)
  std::optional<double> pool_call_ms;
  int64_t max_points = 256;  // size points predicted and selected over (sample_points)
  gensor::ConstructOptions construct = dynamic_construct_options();
  // Extra candidates (e.g. search mode's results), tried alongside construct mode's; with
  // construct_candidates off, the only ones (with the rules' schedule, always a candidate).
  std::vector<schedule::KernelSchedule> candidates;
  bool construct_candidates = true;
  // How every micro-kernel handles the tiles the end of a dynamic axis cuts (set on each
  // candidate's stages); nullopt keeps each candidate's own. Local padding measured at least as
  // fast as the edge variants on the dense layer (benchmarks/dynamic.py --case padding).
  std::optional<schedule::EdgeMode> edge = schedule::EdgeMode::kLocalPad;
  CostModelConstants cost;
  SelectionConstants selection;
  DispatchConstants dispatch;
  runtime::MeasureOptions timing = [] {
    runtime::MeasureOptions o;
    o.warmup = 1;
    o.min_repeats = 2;
    o.min_time_ms = 5;  // enough for a median; the candidates' timings are most of the tuning
    o.max_repeats = 50;
    return o;
  }();
  // Verification: |got - want| <= atol_rel * (1 + max |want|) + rtol * |want|.
  double rtol = 1e-3;
  double atol_rel = 1e-4;
  uint64_t seed = 17;  // random inputs
  // Empty: runtime::measure of the kernel on random inputs sized for the largest instance. Tests
  // put a model here (timing-free tests).
  SizeTimer timer;
  db::RecordsDB* records = nullptr;  // not owned; null: no records
};

struct CandidateReport {
  schedule::KernelSchedule schedule;
  // "rules", "rules-vote", "given", "construct@<sizes>", "search@<sizes>", "mutation", "serial"
  std::string origin;
  bool ok = false;  // built, verified and timed
  std::string error;
  bool pruned = false;
  KernelTimeModel model;  // fitted throughput and overhead
};

struct DynamicTuneResult {
  std::shared_ptr<const DynamicKernel> kernel;
  DynamicSelection selection;
  bool from_records = false;
  std::vector<CandidateReport> candidates;  // empty when from records
  // Search mode's choice on the largest instance (search_trials > 0); a candidate, under the
  // origin of an equal schedule proposed before it when there was one.
  std::optional<schedule::KernelSchedule> searched;
  int search_measured = 0;        // the candidates that search measured
  std::vector<SizePoint> points;  // the sample points selected over
  std::vector<int> assignment;    // per point: selected kernel
  double tune_s = 0;
  int timings = 0;  // timer calls
  // Wall time of each phase, in order: "candidates" (construct's walks and the mutations),
  // "build_time" (candidates built, verified and timed), "serial", "select" (the rest).
  std::vector<std::pair<std::string, double>> phase_s;
};

DynamicTuneResult tune_dynamic(const DynamicWorkload& workload,
                               const DynamicTuneOptions& options = {});

// Representative instances: `n` points evenly spread towards the largest, which is always one.
std::vector<SizePoint> representative_points(const DynamicWorkload& w, int n);
// The rules' schedules at `points` sizes spread over the ranges (sample_points), each size voting
// with its work (the product of its sizes) for its own; the `votes` with the most, most first.
// The rules fit their tiles to each size, and construct mode's predict-only candidates at the
// representatives leave the rules out.
std::vector<schedule::KernelSchedule> rules_by_vote(const DynamicWorkload& w, int64_t points,
                                                    int votes);
// Where a candidate with geometry `g` is checked against the reference: the smallest instance,
// and the sample point of least work at which every dynamic spatial axis holds two whole cache
// tiles and a cut one, cut inside a register tile too (the first tile, the step between tiles
// and the edge code each run); where no sample point up to the middle of the ranges does, the
// middle, made odd. (A micro-kernel made for few rows is slow on many: check it on few.)
std::vector<SizePoint> verification_points(const std::vector<SizePoint>& points,
                                           const MicroKernelGeometry& g, const DynamicWorkload& w);
// The schedule with the main stage's cache tile halved and doubled on each axis whose extent is
// symbolic (only variants the annotation's tile divisibility allows).
std::vector<schedule::KernelSchedule> tile_mutations(
    const schedule::StagePlan& plan, const schedule::KernelSchedule& s,
    const std::map<const ir::ExprNode*, int64_t>& at);

}  // namespace tessera::tune::dynamic
