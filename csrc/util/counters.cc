#include "util/counters.h"

#include <array>
#include <atomic>

namespace tessera::util {

namespace {

constexpr size_t kNumCounters = static_cast<size_t>(Counter::kCount);
std::array<std::atomic<int64_t>, kNumCounters> g_counters{};
// Microseconds, so the sum stays an atomic integer.
std::atomic<int64_t> g_tune_us{0};

}  // namespace

const char* counter_name(Counter c) {
  switch (c) {
    case Counter::kStagePlans:
      return "stage_plans";
    case Counter::kLowerings:
      return "lowerings";
    case Counter::kJitCompiles:
      return "jit_compiles";
    case Counter::kCandidates:
      return "candidates";
    case Counter::kTimingRuns:
      return "timing_runs";
    case Counter::kCompileCalls:
      return "compile_calls";
    case Counter::kRecordHits:
      return "record_hits";
    case Counter::kTuneRuns:
      return "tune_runs";
    case Counter::kCount:
      break;
  }
  return "?";
}

void bump(Counter c, int64_t amount) {
  g_counters[static_cast<size_t>(c)].fetch_add(amount, std::memory_order_relaxed);
}

int64_t read(Counter c) { return g_counters[static_cast<size_t>(c)].load(); }

void add_tune_seconds(double s) { g_tune_us.fetch_add(static_cast<int64_t>(s * 1e6)); }

double tune_seconds() { return static_cast<double>(g_tune_us.load()) * 1e-6; }

std::map<std::string, double> counters_snapshot() {
  std::map<std::string, double> out;
  for (size_t i = 0; i < kNumCounters; ++i) {
    out[counter_name(static_cast<Counter>(i))] = static_cast<double>(g_counters[i].load());
  }
  out["tune_s"] = tune_seconds();
  return out;
}

void reset_counters() {
  for (auto& c : g_counters) c.store(0);
  g_tune_us.store(0);
}

}  // namespace tessera::util
