#pragma once
// Process-wide counters of the compile pipeline's expensive steps, so tests can assert how often
// each happens (a kernel is JIT-compiled once, a kernel's stages are planned once) and benchmarks
// can report them. Thread-safe; reading is a snapshot, not a transaction.
#include <cstdint>
#include <map>
#include <string>

namespace tessera::util {

enum class Counter {
  kStagePlans,    // schedule::plan_stages calls
  kLowerings,     // schedule + plan -> loop IR
  kJitCompiles,   // loop IR -> machine code (LLVM)
  kCandidates,    // tuning candidates built and verified (each is one JIT compile)
  kTimingRuns,    // paired timing comparisons (runtime::time_paired calls)
  kCompileCalls,  // compiler::compile calls
  kRecordHits,    // schedules taken from the records database instead of tuning
  kTuneRuns,      // kernels tuned (construct or search)
  kCount
};

const char* counter_name(Counter c);
void bump(Counter c, int64_t amount = 1);
int64_t read(Counter c);
// Seconds spent tuning in this process (the tuning budget reads it).
void add_tune_seconds(double s);
double tune_seconds();
// Every counter by name, and "tune_s".
std::map<std::string, double> counters_snapshot();
void reset_counters();

}  // namespace tessera::util
