#pragma once
// Description of the host CPU used by schedules and cost models: core count, vector width,
// register file, cache hierarchy and (optionally) measured peaks.
//
// Everything except the peaks is read from the OS/CPUID and is cheap. TESSERA_HW_FILE may point
// to a JSON file with the same fields (see hardware_to_json) to model a different machine or pin
// numbers for reproducible tuning; fields missing from the file keep their detected values.

#include <cstdint>
#include <string>
#include <vector>

#include "cost/peak_probe.h"
#include "util/json.h"

namespace tessera::cost {

struct CacheLevel {
  int level = 0;           // 1, 2, 3...
  int64_t size_bytes = 0;  // capacity of one instance
  int line_bytes = 64;
  bool shared = false;  // one instance serves several CPUs (typically the L3)
};

struct HardwareInfo {
  int num_cores = 1;               // CPUs this process may run on
  int vector_bits = 128;           // 512 with AVX-512, 256 with AVX2, else 128
  int num_vector_registers = 16;   // 32 with AVX-512, else 16
  std::vector<CacheLevel> caches;  // data/unified caches, ordered by level
  PeakInfo peak;                   // zeros unless has_peak
  bool has_peak = false;
};

// with_peak: fill `peak` from get_peak_info() (cached; probes on a cold cache) unless the
// TESSERA_HW_FILE override already provides it. Throws std::runtime_error when TESSERA_HW_FILE is
// set but unreadable or invalid (an explicit override must not be silently ignored).
HardwareInfo host_hardware(bool with_peak = false);

// Detection without the override (exposed for tests and tools that write TESSERA_HW_FILE).
HardwareInfo detect_host_hardware();
// Caches from a sysfs cache directory such as /sys/devices/system/cpu/cpu0/cache (index*/
// subfolders); instruction caches are skipped. Returns defaults (32 KiB L1, 1 MiB L2, 8 MiB shared
// L3) if nothing usable is found.
std::vector<CacheLevel> read_caches_from_sysfs(const std::string& cache_dir);
std::vector<CacheLevel> default_caches();

// Capacity of the cache at `level`, or 0 if there is none.
int64_t cache_size(const HardwareInfo& hw, int level);

util::Json hardware_to_json(const HardwareInfo& hw);
// Overlays the fields present in `json` onto `base`. Throws util::JsonError on invalid fields.
HardwareInfo hardware_from_json(const util::Json& json, const HardwareInfo& base);

}  // namespace tessera::cost
