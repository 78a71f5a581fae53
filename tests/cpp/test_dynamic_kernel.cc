// DynamicKernel: the selected micro-kernels compiled once, the dispatcher choosing per call, and
// the fallback for sizes outside the tuned range; every size checked against the reference.
#include <gtest/gtest.h>

#include "dynamic_check.h"
#include "schedule/default_schedule.h"
#include "tune/dynamic/dynamic_kernel.h"
#include "tune/dynamic/tune_dynamic.h"
#include "util/check.h"
#include "util/counters.h"

namespace tessera::tune::dynamic {
namespace {

// Two micro-kernels for the dense layer: the rules' schedule and its cache tile halved or
// doubled along the dynamic axis. T <= split runs the first, larger T the second.
DynamicSelection two_kernel_selection(const DynamicWorkload& w, int64_t split) {
  const schedule::StagePlan plan = schedule::plan_stages(w.outputs(), w.inputs());
  const schedule::KernelSchedule rules = schedule::default_schedule(plan, schedule::Target::host());
  const std::vector<schedule::KernelSchedule> muts =
      tile_mutations(plan, rules, w.size_map(w.largest()));
  EXPECT_FALSE(muts.empty()) << rules.dump();
  DynamicSelection sel;
  sel.schedules = {rules, muts.empty() ? rules : muts.back()};
  std::vector<SizePoint> pts;
  std::vector<int> labels;
  for (int64_t t = w.ranges()[0].lo; t <= w.ranges()[0].hi; ++t) {
    pts.push_back({t});
    labels.push_back(t <= split ? 0 : 1);
  }
  sel.dispatcher = Dispatcher::build(pts, labels, w.ranges());
  return sel;
}

TEST(DynamicKernel, EverySizeRunsItsKernelAndOutsideSizesTheFallback) {
  testing::DynamicDense d(4, 1, 40);
  const DynamicWorkload w = d.workload();
  const DynamicSelection sel = two_kernel_selection(w, 20);
  const int64_t jits = util::read(util::Counter::kJitCompiles);
  auto dk = DynamicKernel::build(w, sel);
  // Two micro-kernels and the fallback, each compiled once, none per size.
  EXPECT_EQ(util::read(util::Counter::kJitCompiles) - jits, 3);
  ASSERT_EQ(dk->num_kernels(), 2u);
  EXPECT_EQ(dk->kernel(1).schedule().dump(), sel.schedules[1].dump());
  const int64_t built = util::read(util::Counter::kJitCompiles);
  for (int64_t t = 0; t <= 48; ++t) {
    const int want = t < 1 || t > 40 ? kFallback : t <= 20 ? 0 : 1;
    EXPECT_EQ(dk->dispatch(&t), want) << "T = " << t;
    testing::expect_runs_like_reference(
        w, {t}, [&](const std::vector<void*>& b, const SizePoint& s) { dk->run(b, s); });
  }
  // Far outside the range: still the fallback (the rules' schedule), no compile.
  const int64_t huge = 700;
  EXPECT_EQ(dk->dispatch(&huge), kFallback);
  testing::expect_runs_like_reference(
      w, {huge}, [&](const std::vector<void*>& b, const SizePoint& s) { dk->run(b, s); });
  EXPECT_EQ(util::read(util::Counter::kJitCompiles), built);
  // The raw ABI path runs the same kernels.
  testing::expect_runs_like_reference(w, {13},
                                      [&](const std::vector<void*>& b, const SizePoint& s) {
                                        std::vector<void*> ptrs = b;
                                        dk->run(ptrs.data(), s.data());
                                      });
}

// A weight read packed once: the micro-kernel that packs it reads its layout's segment of one
// packed argument, the one that reads it as it is reads the plain copy in the same argument, and
// the fallback its own layout's segment (shared with a kernel of the same layout).
TEST(DynamicKernel, ConstantWeightsAreReadFromOnePackedArgument) {
  testing::DynamicDense d(4, 1, 40);
  const DynamicWorkload w = d.workload({1});
  DynamicSelection sel = two_kernel_selection(w, 20);
  for (schedule::StageAnnotation& st : sel.schedules[1].stages) st.pack.clear();
  auto dk = DynamicKernel::build(w, sel);
  ASSERT_EQ(dk->kernel(0).prepacks().size(), 1u) << "the rules' schedule packs W";
  EXPECT_EQ(dk->kernel(0).prepacks()[0].input, 1);
  EXPECT_TRUE(dk->kernel(1).prepacks().empty());
  ASSERT_EQ(dk->fallback_kernel().prepacks().size(), 1u);
  const std::vector<PackedArgument>& args = dk->packed_constants().arguments();
  ASSERT_EQ(args.size(), 1u);
  EXPECT_EQ(args[0].input, 1);
  // One segment per layout: kernel 0's and the fallback's packed ones (one when they agree),
  // and the plain copy; each 64-byte aligned, none overlapping.
  const bool same_layout = dk->kernel(0).prepacks()[0].kernel->arg_numels({})[1] ==
                               dk->fallback_kernel().prepacks()[0].kernel->arg_numels({})[1] &&
                           dk->kernel(0).schedule().stages[0].tile_reg ==
                               dk->fallback_kernel().schedule().stages[0].tile_reg;
  EXPECT_EQ(args[0].segments.size(), same_layout ? 2u : 3u);
  int64_t end = 0;
  for (const PackSegment& seg : args[0].segments) {
    EXPECT_EQ(seg.offset_bytes % 64, 0);
    EXPECT_GE(seg.offset_bytes, end);
    end = seg.offset_bytes + seg.bytes;
  }
  EXPECT_LE(end, args[0].bytes);
  EXPECT_EQ(args[0].numel * 4, args[0].bytes);
  for (int64_t t : {0, 1, 7, 20, 21, 33, 40, 41, 97}) {
    testing::expect_runs_like_reference(w, {t}, testing::packed_run(*dk, w));
  }
  // Without constant inputs nothing is packed ahead: the same selection takes W as it is.
  const DynamicWorkload plain = d.workload();
  auto dk_plain = DynamicKernel::build(plain, sel);
  EXPECT_TRUE(dk_plain->packed_constants().empty());
  EXPECT_TRUE(dk_plain->kernel(0).prepacks().empty());
  testing::expect_runs_like_reference(
      plain, {33}, [&](const std::vector<void*>& b, const SizePoint& s) { dk_plain->run(b, s); });
  EXPECT_THROW(dk->packed_constants().pack(0, nullptr, nullptr), Error);  // X is no argument
}

TEST(DynamicKernel, BadCallsAreErrorsNotCrashes) {
  testing::DynamicDense d(4, 1, 40);
  const DynamicWorkload w = d.workload();
  auto dk = DynamicKernel::build(w, two_kernel_selection(w, 20));
  std::vector<float> x(4 * 40 * 24), wt(40 * 24), y(4 * 40 * 40);
  EXPECT_THROW(dk->run({x.data(), wt.data()}, {3}), Error);               // a buffer short
  EXPECT_THROW(dk->run({x.data(), wt.data(), y.data()}, {3, 4}), Error);  // a size too many
  EXPECT_THROW(dk->run({x.data(), wt.data(), y.data()}, {-1}), Error);    // a negative size
  EXPECT_NO_THROW(dk->run({x.data(), wt.data(), y.data()}, {40}));
  // A selection that dispatches to a kernel it does not have is refused when built.
  DynamicSelection bad = two_kernel_selection(w, 20);
  bad.schedules.pop_back();
  EXPECT_THROW(DynamicKernel::build(w, bad), Error);
}

TEST(DynamicKernel, SelectionJsonRoundTrip) {
  testing::DynamicDense d(4, 1, 40);
  const DynamicWorkload w = d.workload();
  DynamicSelection sel = two_kernel_selection(w, 9);
  sel.wave_k = 0.25;
  sel.predicted_loss = 0.01;
  sel.candidates = 7;
  const DynamicSelection back =
      DynamicSelection::from_json(util::Json::parse(sel.to_json().dump()));
  EXPECT_EQ(back.to_json().dump(), sel.to_json().dump());
  for (int64_t t = -1; t <= 42; ++t)
    EXPECT_EQ(back.dispatcher.lookup({t}), sel.dispatcher.lookup({t}));
  // Records written before the fallback became the rules' schedule name a fallback schedule;
  // they still load. A selection without schedules does not.
  util::Json old = sel.to_json();
  old["fallback"] = util::Json(1);
  EXPECT_EQ(DynamicSelection::from_json(old).to_json().dump(), sel.to_json().dump());
  util::Json empty = sel.to_json();
  empty["schedules"] = util::Json::array();
  EXPECT_THROW(DynamicSelection::from_json(empty), Error);
}

}  // namespace
}  // namespace tessera::tune::dynamic
