// DietCode benchmark in C++ (timing, not correctness; disabled by default):
//   TESSERA_DYN_BENCH="rows=16,k=768,n=2304,tmax=128,step=1" tessera_tests
//     --gtest_also_run_disabled_tests --gtest_filter='*DynamicBenchmark*'
// The dense layer Y = X W^T, X [rows*T, k], W [n, k], T in 1..tmax: one DietCode tuning against
// construct-mode tuning of each sampled T (every `step`-th), timed side by side (paired timing:
// per-shape kernel as the reference). Prints geomean/min speed vs per-shape, kernel count,
// tuning times and dispatch latency. It checks DietCode's result against the per-shape kernel's
// at every size, so a fast but wrong kernel cannot look good.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>

#include "compiler/compile.h"
#include "dynamic_check.h"
#include "runtime/paired_timing.h"
#include "tune/dynamic/tune_dynamic.h"
#include "util/check.h"

namespace tessera::tune::dynamic {
namespace {

std::map<std::string, int64_t> bench_params() {
  std::map<std::string, int64_t> p = {
      {"rows", 16}, {"k", 768}, {"n", 2304}, {"tmax", 128}, {"step", 1}};
  const char* env = std::getenv("TESSERA_DYN_BENCH");
  std::stringstream ss(env ? env : "");
  std::string item;
  while (std::getline(ss, item, ',')) {
    const size_t eq = item.find('=');
    if (eq != std::string::npos) p[item.substr(0, eq)] = std::stoll(item.substr(eq + 1));
  }
  return p;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST(DISABLED_DynamicBenchmark, DenseLayerAgainstPerShapeTuning) {
  const auto p = bench_params();
  testing::DynamicDense d(p.at("rows"), 1, p.at("tmax"), p.at("k"), p.at("n"));
  const DynamicWorkload w = d.workload();

  auto t0 = std::chrono::steady_clock::now();
  const DynamicTuneResult r = tune_dynamic(w);
  const double dyn_s = seconds_since(t0);
  std::printf(
      "dietcode: %zu kernels of %d candidates (%d pruned), top_k %d, wave_k %.3f, "
      "predicted loss %.2f%% (worst %.2f%%), tuning %.1f s, %d timings\n",
      r.selection.schedules.size(), r.selection.candidates, r.selection.pruned, r.selection.top_k,
      r.selection.wave_k, 100 * r.selection.predicted_loss, 100 * r.selection.worst_point_loss,
      dyn_s, r.timings);

  for (const CandidateReport& c : r.candidates) {
    std::printf("  candidate %-16s ok %d pruned %d throughput %.4g pts/ms overhead %.4f ms  %s%s\n",
                c.origin.c_str(), c.ok, c.pruned, c.model.throughput, c.model.overhead_ms,
                c.schedule.stages_text().c_str(),
                c.error.empty() ? "" : (" error: " + c.error).c_str());
  }
  for (const auto& s : r.selection.schedules)
    std::printf("  selected %s\n", s.stages_text().c_str());

  // Dispatch latency: lookups over the whole range, many times (a loop of dependent lookups so
  // the compiler cannot hoist them).
  const int64_t tmax = p.at("tmax");
  const int reps = 2000000;
  int64_t sink = 0;
  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) {
    const int64_t t = 1 + (i + sink) % tmax;
    sink += r.kernel->dispatch(&t);
  }
  std::printf("dispatch: %.1f ns per lookup (sink %lld)\n", 1e9 * seconds_since(t0) / reps,
              static_cast<long long>(sink % 7));
  std::fflush(stdout);

  double log_sum = 0, worst = 1e300, tune_one_max = 0, tune_sum = 0;
  int n = 0;
  for (int64_t t = tmax; t >= 1; t -= p.at("step")) {
    const DagCopy inst = w.instantiate({t});
    compiler::CompileRequest req;
    req.tune = compiler::TuneMode::kConstruct;
    t0 = std::chrono::steady_clock::now();
    const compiler::CompileResult per_shape = compiler::compile(inst.outputs, inst.inputs, req);
    const double tune_s = seconds_since(t0);
    tune_one_max = std::max(tune_one_max, tune_s);
    tune_sum += tune_s;
    // Buffers for this instance; DietCode's result checked against the per-shape kernel's.
    const auto sm = w.size_map({t});
    std::vector<runtime::NDArray> arrays;
    for (const ir::Tensor& in : w.inputs()) {
      arrays.push_back(runtime::NDArray::random(in->dtype, testing::shape_at(in, sm), 1));
    }
    const ir::Tensor& out = w.outputs()[0];
    arrays.emplace_back(out->dtype, testing::shape_at(out, sm));
    runtime::NDArray want(out->dtype, testing::shape_at(out, sm));
    std::vector<void*> ptrs = {arrays[0].data(), arrays[1].data(), arrays[2].data()};
    std::vector<void*> ref_ptrs = {arrays[0].data(), arrays[1].data(), want.data()};
    per_shape.kernel->run(ref_ptrs, {});
    const int64_t size = t;
    runtime::PairedTiming pt = runtime::time_paired([&] { per_shape.kernel->run(ptrs, {}); },
                                                    {[&] { r.kernel->run(ptrs.data(), &size); }});
    ASSERT_TRUE(pt.reference_ok) << pt.reference_error;
    const double speed = 1.0 / pt.ratio[0];  // > 1: DietCode faster than per-shape tuning
    log_sum += std::log(speed);
    worst = std::min(worst, speed);
    ++n;
    std::printf(
        "T=%3lld  per-shape %.3f ms (%s, tuned %.1f s)  dietcode %.3f ms (kernel %d)  "
        "speed %.3f  per-shape schedule %s\n",
        static_cast<long long>(t), pt.reference_ms, per_shape.report.source.c_str(), tune_s,
        pt.median_ms[0], r.kernel->dispatch(&size), speed,
        per_shape.report.schedule.stages_text().c_str());
    std::fflush(stdout);
  }
  std::printf(
      "summary: geomean %.3f  min %.3f over %d sizes; %zu kernels; tuning %.1f s vs "
      "one per-shape tuning %.1f s (max; %.1f s for all sampled)\n",
      std::exp(log_sum / n), worst, n, r.selection.schedules.size(), dyn_s, tune_one_max, tune_sum);
}

}  // namespace
}  // namespace tessera::tune::dynamic
