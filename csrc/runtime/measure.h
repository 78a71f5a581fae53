#pragma once
// Timing harness used by the tuners to measure candidate kernels.
//
// Protocol: warm-up runs (untimed), then timed samples, one call per sample, until both
// min_repeats samples and min_time_ms of summed sample time are reached (or max_repeats). The
// median is the headline number: it ignores the occasional preemption on a shared machine, where
// the mean would not. An optional cache flush between samples (untimed) gives cold-cache numbers.

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace tessera::runtime {

struct MeasureOptions {
  int warmup = 1;            // untimed calls before sampling
  double min_time_ms = 50;   // keep sampling until the samples add up to this...
  int min_repeats = 3;       // ...and at least this many samples were taken
  int max_repeats = 1000;    // hard cap on samples (wins over min_time_ms and min_repeats)
  bool flush_cache = false;  // write flush_bytes of memory before every sample (not timed)
  size_t flush_bytes = 64 << 20;
};

struct MeasureResult {
  double median_ms = 0, mean_ms = 0, min_ms = 0, max_ms = 0, stddev_ms = 0;
  int repeats = 0;
  std::vector<double> samples_ms;  // in the order they were taken
  bool ok = false;
  std::string error;  // why ok is false: verification failure or an exception from run/verify
};

// Times run(). Exceptions thrown by run() are caught and reported as ok=false.
MeasureResult measure(const std::function<void()>& run, const MeasureOptions& options = {});

// verify() is called once after one run and before timing; if it returns false the result has
// ok=false and error set (with *why if verify filled it), and no time counts. The verification
// run counts as the first warm-up run.
MeasureResult measure_verified(const std::function<void()>& run,
                               const std::function<bool(std::string* why)>& verify,
                               const MeasureOptions& options = {});

// Summary statistics of a sample vector (median of an even count is the mean of the middle two).
// Fills every field except ok/error; an empty input gives all zeros.
MeasureResult summarize_samples(std::vector<double> samples_ms);

}  // namespace tessera::runtime
