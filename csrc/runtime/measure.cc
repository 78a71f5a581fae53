#include "runtime/measure.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <numeric>

namespace tessera::runtime {
namespace {

// Evicts caches by writing a buffer larger than the caches. The buffer is kept per thread and
// reused, so the page faults of the first allocation are paid once, not per sample.
void flush_caches(size_t bytes) {
  static thread_local std::vector<unsigned char> buffer;
  if (buffer.size() != bytes) buffer.assign(bytes, 0);
  static thread_local unsigned char tick = 0;
  ++tick;
  // One write per 64-byte line is enough to own every line (and evict what was there). The
  // buffer outlives the call, so the compiler cannot drop the stores as dead.
  for (size_t i = 0; i < bytes; i += 64) buffer[i] = static_cast<unsigned char>(buffer[i] + tick);
}

std::string describe_exception(const char* where) {
  try {
    throw;
  } catch (const std::exception& e) {
    return std::string(where) + " threw: " + e.what();
  } catch (...) {
    return std::string(where) + " threw a non-std exception";
  }
}

MeasureResult failure(std::string error) {
  MeasureResult r;
  r.ok = false;
  r.error = std::move(error);
  return r;
}

// Warm-up and timed sampling; `warmups_done` calls have already been made by the caller.
MeasureResult run_samples(const std::function<void()>& run, const MeasureOptions& opt,
                          int warmups_done) {
  const int max_repeats = std::max(1, opt.max_repeats);
  const int min_repeats = std::clamp(opt.min_repeats, 1, max_repeats);
  std::vector<double> samples;
  try {
    for (int i = warmups_done; i < opt.warmup; ++i) run();
    double total_ms = 0;
    while (static_cast<int>(samples.size()) < max_repeats) {
      if (static_cast<int>(samples.size()) >= min_repeats && total_ms >= opt.min_time_ms) break;
      if (opt.flush_cache && opt.flush_bytes > 0) flush_caches(opt.flush_bytes);
      auto t0 = std::chrono::steady_clock::now();
      run();
      auto t1 = std::chrono::steady_clock::now();
      double ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
      samples.push_back(ms);
      total_ms += ms;
    }
  } catch (...) {
    return failure(describe_exception("run"));
  }
  MeasureResult r = summarize_samples(std::move(samples));
  r.ok = true;
  return r;
}

}  // namespace

MeasureResult summarize_samples(std::vector<double> samples_ms) {
  MeasureResult r;
  r.repeats = static_cast<int>(samples_ms.size());
  r.samples_ms = samples_ms;
  if (samples_ms.empty()) return r;
  const size_t n = samples_ms.size();
  std::sort(samples_ms.begin(), samples_ms.end());
  r.min_ms = samples_ms.front();
  r.max_ms = samples_ms.back();
  r.median_ms =
      (n % 2 == 1) ? samples_ms[n / 2] : 0.5 * (samples_ms[n / 2 - 1] + samples_ms[n / 2]);
  r.mean_ms = std::accumulate(samples_ms.begin(), samples_ms.end(), 0.0) / static_cast<double>(n);
  double var = 0;
  for (double s : samples_ms) var += (s - r.mean_ms) * (s - r.mean_ms);
  // Sample standard deviation (n - 1): the samples estimate a noisy distribution.
  r.stddev_ms = n > 1 ? std::sqrt(var / static_cast<double>(n - 1)) : 0.0;
  return r;
}

MeasureResult measure(const std::function<void()>& run, const MeasureOptions& options) {
  return run_samples(run, options, 0);
}

MeasureResult measure_verified(const std::function<void()>& run,
                               const std::function<bool(std::string* why)>& verify,
                               const MeasureOptions& options) {
  try {
    run();
  } catch (...) {
    return failure(describe_exception("run"));
  }
  std::string why;
  bool good = false;
  try {
    good = verify(&why);
  } catch (...) {
    return failure(describe_exception("verify"));
  }
  if (!good) return failure("verification failed" + (why.empty() ? std::string() : ": " + why));
  return run_samples(run, options, 1);
}

}  // namespace tessera::runtime
