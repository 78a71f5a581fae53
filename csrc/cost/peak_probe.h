#pragma once
// Measured peak FP32 throughput and memory bandwidth of the host CPU.
//
// The analytic cost models (Gensor's construct mode, roofline estimates, benchmark reports of
// "% of peak") need the machine's real ceilings rather than datasheet numbers: clocks under
// AVX-512 load, VM throttling and memory channels all differ per host. Probing takes about a
// second, so the result is cached on disk per CPU model and thread count.

#include <string>

#include "util/json.h"

namespace tessera::cost {

struct PeakInfo {
  double fp32_gflops_1core = 0;  // FMA throughput of one thread, GFLOP/s (an FMA counts as 2)
  double fp32_gflops_all = 0;    // all `threads` threads running concurrently
  int threads = 0;               // threads used for the *_all numbers; 0 means "not probed"
  double mem_bw_gbs_1core = 0;   // STREAM triad (a = b + s*c), bytes counted as 3 arrays, GB/s
  double mem_bw_gbs_all = 0;
  std::string cpu_model;
  std::string isa;  // "avx512", "avx2", "sse": the widest FMA path the probe used
};

// Measures now (about 1-3 s). threads <= 0: every CPU in this process's affinity mask.
PeakInfo probe_peak(int threads = 0);

// Cached probe: reads $TESSERA_CACHE_DIR/peak.json (default ~/.cache/tessera/peak.json), keyed by
// CPU model and thread count; a missing, corrupt or stale entry (or refresh=true) re-probes and
// rewrites the file. Stale includes a one-core FMA peak that a quick check (a few ms, once per
// process) beats by more than 15%: the probe ran while the cores were busy. Never throws for cache
// problems: an unwritable cache only costs a re-probe in the next process (within a process the
// result is remembered).
PeakInfo get_peak_info(bool refresh = false);

// Helpers shared with the hardware description and tests.
std::string host_cpu_model();     // CPUID brand string, e.g. "Intel(R) Xeon(R) Processor"
std::string host_isa();           // "avx512" | "avx2" | "sse" (runtime CPU detection)
int host_cpu_count();             // CPUs in this process's affinity mask (>= 1)
std::string tessera_cache_dir();  // $TESSERA_CACHE_DIR, else $HOME/.cache/tessera, else ""
std::string peak_cache_key(const std::string& cpu_model, int threads);

util::Json peak_to_json(const PeakInfo& peak);
// Throws util::JsonError when a field is missing, has the wrong type, or is not a sane positive
// finite value.
PeakInfo peak_from_json(const util::Json& json);

}  // namespace tessera::cost
