#pragma once
// The memory hierarchy as the analytic cost models see it: per level a capacity (per core),
// a transfer granularity, a sustained read bandwidth per core and a load-to-use latency, plus the
// compute ceilings (fp32 peak per core, FMA latency and port counts).
//
// Gensor's benefit formulas (Eq. 1-3 of the paper) and the construct-mode time model read these
// numbers. Capacities and line sizes come from the OS (cost/hardware.h); the DRAM bandwidth and
// the fp32 peak come from the peak probe (cost/peak_probe.h); L1/L2/LLC bandwidths, the LLC's
// usable capacity and the L1/L2/DRAM latencies are measured here by a small read kernel and a
// pointer chase (about 0.5 s), cached on disk next to peak.json. Registers are modelled, not
// measured: their "bandwidth" is what the two FMA ports consume (3 operands per FMA), their
// latency one cycle.
//
// The last-level cache matters to the models even though no schedule tiles for it: a problem
// whose tensors fit in it (a ResNet res4 conv: 2.8 MB) refills L2 from there at twice the DRAM
// rate on this kind of machine, and a model that charges DRAM bandwidth for it ranks schedules on
// a memory time three times too large. Its capacity is the share a process can count on, found by
// reading ever larger buffers: in a VM the OS reports the whole socket's L3 (260 MB) while the
// bandwidth falls to DRAM's well before that.
//
// Override: a TESSERA_HW_FILE JSON (see cost/hardware.h) may carry a "memory_levels" array of
// {"name", "capacity_bytes", "line_bytes", "bandwidth_gbs", "latency_ns", "ways"} objects (matched
// by name; missing fields keep their probed values) and a "compute" object with
// "fma_latency_cycles", "fma_ports", "load_ports".
#include <cstdint>
#include <string>
#include <vector>

#include "util/json.h"

namespace tessera::cost {

struct MemoryLevel {
  std::string name;            // "dram", "llc", "l2", "l1", "reg"
  int64_t capacity_bytes = 0;  // usable by one core (the LLC: by the process); 0 = unbounded
                               // for DRAM, none for an LLC
  int line_bytes = 64;         // transfer granularity into the next level inward
  double bandwidth_gbs = 0;    // sustained read bandwidth of one core from this level
  double latency_ns = 0;       // load-to-use latency
  int ways = 8;                // associativity (caches; set-aliasing checks)
};

struct MemoryHierarchy {
  // Outermost first: dram, llc, l2, l1, reg. Index constants below.
  std::vector<MemoryLevel> levels;
  int cores = 1;
  int vector_lanes = 16;  // fp32 lanes of one SIMD register
  int num_vector_registers = 32;
  double fp32_gflops_core = 0;    // measured FMA peak of one core
  double dram_bw_all_gbs = 0;     // all cores streaming together
  double fma_latency_cycles = 4;  // dependent-FMA latency: independent accumulators needed =
  int fma_ports = 2;              // latency x ports (8 on current x86 cores)
  int load_ports = 2;

  // Core clock implied by the measured peak (peak = ports * lanes * 2 flops * GHz).
  double ghz() const;
  const MemoryLevel& level(const std::string& name) const;  // throws if absent
};

inline constexpr int kLevelDram = 0;
inline constexpr int kLevelLlc = 1;
inline constexpr int kLevelL2 = 2;
inline constexpr int kLevelL1 = 3;
inline constexpr int kLevelReg = 4;
inline constexpr int kNumLevels = 5;

// Measures now (L1/L2 bandwidth and latencies; takes the rest from host_hardware(true)).
MemoryHierarchy probe_memory_hierarchy();

// Cached: in-process memo, then $TESSERA_CACHE_DIR/memory_levels.json keyed like peak.json, then
// a probe. The TESSERA_HW_FILE overlay is applied last. Never throws for cache problems; throws
// std::runtime_error when an explicit TESSERA_HW_FILE override is invalid.
MemoryHierarchy host_memory_hierarchy(bool refresh = false);

// Values from the OS and the peak probe only, with textbook bandwidth/latency ratios for the
// caches: used by tests and as the fallback when a probe result is not sane.
MemoryHierarchy modeled_memory_hierarchy();

util::Json memory_hierarchy_to_json(const MemoryHierarchy& h);
// Overlays `json` (an object with "memory_levels" and/or "compute") onto `base`.
MemoryHierarchy memory_hierarchy_from_json(const util::Json& json, const MemoryHierarchy& base);

}  // namespace tessera::cost
