#include "runtime/paired_timing.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <limits>

#include "runtime/measure.h"
#include "util/counters.h"

namespace tessera::runtime {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double median_of(std::vector<double> v) { return summarize_samples(std::move(v)).median_ms; }

// Runs the rounds of one comparison; one instance per time_paired call.
class PairedRounds {
 public:
  PairedRounds(const std::function<void()>& reference,
               const std::vector<std::function<void()>>& candidates,
               const PairedTimingOptions& options)
      : reference_(reference), candidates_(candidates), opt_(options) {
    const size_t n = candidates.size();
    out_.ok.assign(n, true);
    out_.error.assign(n, "");
    out_.ratio.assign(n, std::numeric_limits<double>::infinity());
    out_.median_ms.assign(n, std::numeric_limits<double>::infinity());
    out_.rounds.assign(n, 0);
    out_.calls.assign(n, 0);
    out_.dropped.assign(n, false);
    ratios_.resize(n);
    last_ms_.assign(n, 0);
  }

  PairedTiming run() {
    std::vector<bool> active(candidates_.size(), true);
    out_.reference_ok = true;
    rounds(active, std::max(1, opt_.rounds), std::max(1, opt_.min_rounds), opt_.budget_ms);
    race();
    finish();
    return out_;
  }

 private:
  // Median of one round of `fn`, or throws what fn threw. `last_ms`: the previous round's
  // median (0: none), which tells whether calls are short enough to need several.
  double round(const std::function<void()>& fn, double last_ms, int* calls) {
    bool short_calls = last_ms <= 0 || last_ms < opt_.round_ms;
    if (short_calls) {
      // The other implementation ran last: one untimed call warms caches and threads. When that
      // call alone lasts a round, one timed call is the round.
      const auto w0 = Clock::now();
      fn();
      short_calls = ms_since(w0) < opt_.round_ms;
    }
    std::vector<double> samples;
    double total = 0;
    do {
      const auto t0 = Clock::now();
      fn();
      samples.push_back(ms_since(t0));
      total += samples.back();
    } while ((total < opt_.round_ms ||
              (short_calls && static_cast<int>(samples.size()) < opt_.min_calls)) &&
             samples.size() < 10000);
    *calls += static_cast<int>(samples.size());
    return median_of(std::move(samples));
  }

  bool reference_round() {
    try {
      ref_ms_.push_back(
          round(reference_, ref_ms_.empty() ? 0 : ref_ms_.back(), &out_.reference_calls));
      ++out_.reference_rounds;
      return true;
    } catch (const std::exception& e) {
      out_.reference_ok = false;
      out_.reference_error = e.what();
    } catch (...) {
      out_.reference_ok = false;
      out_.reference_error = "the reference threw a non-std exception";
    }
    return false;
  }

  void fail(size_t c, const std::string& why) {
    out_.ok[c] = false;
    out_.error[c] = why;
  }

  // Rounds over the active candidates: at least `min_count`, at most `count`, and no new round
  // once budget_ms was spent.
  void rounds(const std::vector<bool>& active, int count, int min_count, double budget_ms) {
    const auto start = Clock::now();
    for (int r = 0; r < count; ++r) {
      if (r >= min_count && ms_since(start) > budget_ms) break;
      if (!out_.reference_ok) return;
      // Every candidate round needs a reference round right before it: the previous round's
      // last one, or a new one to open the first round.
      if (ref_ms_.empty() && !reference_round()) return;
      for (size_t c = 0; c < candidates_.size(); ++c) {
        if (!active[c] || !out_.ok[c] || out_.dropped[c]) continue;
        double t = 0;
        try {
          t = round(candidates_[c], last_ms_[c], &out_.calls[c]);
        } catch (const std::exception& e) {
          fail(c, e.what());
          continue;
        } catch (...) {
          fail(c, "the candidate threw a non-std exception");
          continue;
        }
        last_ms_[c] = t;
        const double before = ref_ms_.back();
        if (!reference_round()) return;
        ratios_[c].push_back(t / ((before + ref_ms_.back()) / 2));
        ++out_.rounds[c];
        if (opt_.drop_ratio > 0 && ratios_[c].size() == 1 && ratios_[c][0] > opt_.drop_ratio) {
          out_.dropped[c] = true;
        }
      }
    }
  }

  void race() {
    const size_t finalists = static_cast<size_t>(std::max(0, opt_.finalists));
    if (!out_.reference_ok || finalists == 0 || opt_.final_rounds <= 0) return;
    std::vector<std::pair<double, size_t>> ranked;
    for (size_t c = 0; c < candidates_.size(); ++c) {
      if (out_.ok[c] && !out_.dropped[c] && !ratios_[c].empty()) {
        ranked.emplace_back(median_of(ratios_[c]), c);
      }
    }
    if (ranked.size() <= finalists) return;
    std::sort(ranked.begin(), ranked.end());
    std::vector<bool> finalist(candidates_.size(), false);
    for (size_t i = 0; i < finalists; ++i) finalist[ranked[i].second] = true;
    rounds(finalist, opt_.final_rounds, 1, opt_.final_budget_ms);
  }

  void finish() {
    if (!out_.reference_ok) {
      for (size_t c = 0; c < candidates_.size(); ++c) {
        if (out_.ok[c]) fail(c, "the reference failed: " + out_.reference_error);
      }
      return;
    }
    out_.reference_ms = median_of(ref_ms_);
    for (size_t c = 0; c < candidates_.size(); ++c) {
      if (!out_.ok[c] || ratios_[c].empty()) continue;
      out_.ratio[c] = median_of(ratios_[c]);
      out_.median_ms[c] = out_.ratio[c] * out_.reference_ms;
    }
  }

  const std::function<void()>& reference_;
  const std::vector<std::function<void()>>& candidates_;
  PairedTimingOptions opt_;
  PairedTiming out_;
  std::vector<double> ref_ms_;               // reference round medians, in order
  std::vector<std::vector<double>> ratios_;  // per candidate: round ratios
  std::vector<double> last_ms_;              // per candidate: last round median
};

}  // namespace

PairedTiming time_paired(const std::function<void()>& reference,
                         const std::vector<std::function<void()>>& candidates,
                         const PairedTimingOptions& options) {
  util::bump(util::Counter::kTimingRuns);
  return PairedRounds(reference, candidates, options).run();
}

int paired_winner(const PairedTiming& timing, double win_margin) {
  int best = -1;
  for (size_t c = 0; c < timing.ratio.size(); ++c) {
    if (!timing.ok[c] || timing.dropped[c] || timing.ratio[c] >= win_margin) continue;
    if (best < 0 || timing.ratio[c] < timing.ratio[best]) best = static_cast<int>(c);
  }
  return best;
}

}  // namespace tessera::runtime
