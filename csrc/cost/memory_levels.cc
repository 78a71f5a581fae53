#include "cost/memory_levels.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <numeric>
#include <random>
#include <stdexcept>
#include <vector>

#include "cost/hardware.h"
#include "cost/peak_probe.h"

namespace tessera::cost {
namespace {

using Clock = std::chrono::steady_clock;

// Bumped whenever the probe changes, so stale entries are re-measured.
constexpr int kCacheVersion = 3;  // 3: the llc level

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

volatile float g_read_sink = 0;
volatile uint32_t g_chase_sink = 0;

// ---- read bandwidth -------------------------------------------------------------------------
// Sums a buffer with 8 independent vector accumulators (enough to keep two load ports busy), so
// the loop is bound by how fast the level delivers data, not by the add latency.
#if defined(__x86_64__) || defined(__i386__)
__attribute__((target("avx512f"))) float read_avx512(const float* p, int64_t n) {
  // Written out (not a loop over accumulators) so that they surely live in registers at -O2.
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
  for (int64_t i = 0; i + 128 <= n; i += 128) {
    a0 = _mm512_add_ps(a0, _mm512_load_ps(p + i));
    a1 = _mm512_add_ps(a1, _mm512_load_ps(p + i + 16));
    a2 = _mm512_add_ps(a2, _mm512_load_ps(p + i + 32));
    a3 = _mm512_add_ps(a3, _mm512_load_ps(p + i + 48));
    a4 = _mm512_add_ps(a4, _mm512_load_ps(p + i + 64));
    a5 = _mm512_add_ps(a5, _mm512_load_ps(p + i + 80));
    a6 = _mm512_add_ps(a6, _mm512_load_ps(p + i + 96));
    a7 = _mm512_add_ps(a7, _mm512_load_ps(p + i + 112));
  }
  __m512 sum = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                             _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));
  // Stored and summed in scalar code: GCC 12's _mm512_reduce_add_ps trips -Wuninitialized.
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, sum);
  return std::accumulate(lanes, lanes + 16, 0.0f);
}

__attribute__((target("avx2"))) float read_avx2(const float* p, int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
  for (int64_t i = 0; i + 64 <= n; i += 64) {
    a0 = _mm256_add_ps(a0, _mm256_load_ps(p + i));
    a1 = _mm256_add_ps(a1, _mm256_load_ps(p + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_load_ps(p + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_load_ps(p + i + 24));
    a4 = _mm256_add_ps(a4, _mm256_load_ps(p + i + 32));
    a5 = _mm256_add_ps(a5, _mm256_load_ps(p + i + 40));
    a6 = _mm256_add_ps(a6, _mm256_load_ps(p + i + 48));
    a7 = _mm256_add_ps(a7, _mm256_load_ps(p + i + 56));
  }
  __m256 sum = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                             _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, sum);
  return std::accumulate(lanes, lanes + 8, 0.0f);
}
#endif

float read_scalar(const float* p, int64_t n) {
  float acc[8] = {};
  for (int64_t i = 0; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) acc[k] += p[i + k];
  }
  return std::accumulate(acc, acc + 8, 0.0f);
}

using ReadKernel = float (*)(const float*, int64_t);

ReadKernel pick_read_kernel(const std::string& isa) {
#if defined(__x86_64__) || defined(__i386__)
  if (isa == "avx512") return read_avx512;
  if (isa == "avx2") return read_avx2;
#endif
  (void)isa;
  return read_scalar;
}

struct AlignedFloats {
  explicit AlignedFloats(size_t n) : n(n) {
    size_t bytes = (n * sizeof(float) + 63) / 64 * 64;
    p = static_cast<float*>(std::aligned_alloc(64, bytes));
    if (p) std::fill(p, p + n, 1.0f);
  }
  ~AlignedFloats() { std::free(p); }
  AlignedFloats(const AlignedFloats&) = delete;
  AlignedFloats& operator=(const AlignedFloats&) = delete;
  float* p = nullptr;
  size_t n;
};

// GB/s of repeatedly reading `bytes` (half a cache's capacity: resident, but well clear of
// conflict misses). Best of a few ~2 ms timings: background load on a shared machine only ever
// makes a sample slower.
double read_bandwidth_gbs(int64_t bytes, ReadKernel kernel) {
  const int64_t n = std::max<int64_t>(128, bytes / 4 / 128 * 128);
  AlignedFloats buf(static_cast<size_t>(n));
  if (!buf.p) return 0;
  kernel(buf.p, n);  // warm the cache
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    int64_t passes = 0;
    auto t0 = Clock::now();
    double secs = 0;
    do {
      g_read_sink = g_read_sink + kernel(buf.p, n);
      ++passes;
      secs = seconds_since(t0);
    } while (secs < 2e-3);
    best = std::max(best, static_cast<double>(passes * n * 4) / secs * 1e-9);
  }
  return best;
}

// ---- latency --------------------------------------------------------------------------------
// Pointer chase through a random cyclic permutation of cache lines (Sattolo's algorithm): every
// load depends on the previous one and the hardware prefetchers cannot guess the next line.
double chase_latency_ns(int64_t bytes, int64_t steps) {
  constexpr int64_t kStride = 16;  // uint32 slots per 64-byte line
  const int64_t lines = std::max<int64_t>(8, bytes / 64);
  std::vector<uint32_t> next(static_cast<size_t>(lines * kStride), 0);
  std::vector<uint32_t> order(static_cast<size_t>(lines));
  std::iota(order.begin(), order.end(), 0u);
  std::mt19937_64 rng(12345);
  for (int64_t i = lines - 1; i > 0; --i) {
    int64_t j = std::uniform_int_distribution<int64_t>(0, i - 1)(rng);
    std::swap(order[i], order[j]);
  }
  for (int64_t i = 0; i < lines; ++i) {
    next[order[i] * kStride] = order[(i + 1) % lines] * kStride;
  }
  uint32_t p = 0;
  for (int64_t i = 0; i < lines; ++i) p = next[p];  // warm
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    auto t0 = Clock::now();
    for (int64_t i = 0; i < steps; ++i) p = next[p];
    best = std::min(best, seconds_since(t0) * 1e9 / static_cast<double>(steps));
  }
  g_chase_sink = g_chase_sink + p;
  return best;
}

bool sane(double v) { return std::isfinite(v) && v > 0; }

// The LLC's bandwidth and latency from a buffer of four L2s (beyond L2, well inside any L3), and
// the share of it this process can count on: the largest buffer, doubling from there up to what
// the OS reports (at most 128 MiB), still read at 80% of that bandwidth. Measured on a 2-vCPU VM of
// a 260 MB-L3 socket: 28-30 GB/s up to 32 MiB, 24.5 at 64, 23 at 128, DRAM's 15 at 256.
void probe_llc(ReadKernel kernel, const MemoryLevel& l2, const MemoryLevel& dram,
               MemoryLevel* llc) {
  if (llc->capacity_bytes <= 0) return;  // no L3: nothing between L2 and DRAM
  int64_t bytes = std::max<int64_t>(4 * l2.capacity_bytes, int64_t{8} << 20);
  if (bytes > llc->capacity_bytes) {
    llc->capacity_bytes = 0;  // an L3 no larger than a few L2s adds nothing the model can use
    return;
  }
  const double bw = read_bandwidth_gbs(bytes, kernel);
  if (!sane(bw) || bw <= dram.bandwidth_gbs * 1.1) {
    llc->capacity_bytes = 0;  // indistinguishable from DRAM
    return;
  }
  llc->bandwidth_gbs = std::min(bw, l2.bandwidth_gbs);
  const double lat = chase_latency_ns(bytes, 1 << 18);
  if (sane(lat)) llc->latency_ns = std::clamp(lat, l2.latency_ns, dram.latency_ns);
  const int64_t limit = std::min<int64_t>(llc->capacity_bytes, int64_t{128} << 20);
  int64_t usable = bytes;
  for (int64_t next = 2 * bytes; next <= limit; next *= 2) {
    if (read_bandwidth_gbs(next, kernel) < 0.8 * bw) break;
    usable = next;
  }
  llc->capacity_bytes = usable;
}

// Associativity of the data/unified cache at `level` from sysfs (0 when unknown).
int sysfs_ways(int level) {
  for (int index = 0; index < 16; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index);
    std::ifstream lv(dir + "/level"), ty(dir + "/type"), wa(dir + "/ways_of_associativity");
    int l = 0, w = 0;
    std::string type;
    if (!(lv >> l) || !(ty >> type) || type == "Instruction" || l != level) continue;
    if (wa >> w && w > 0) return w;
  }
  return 0;
}

std::string cache_key() {
  return host_cpu_model() + "|threads=" + std::to_string(host_cpu_count());
}

void overlay_from_hw_file(MemoryHierarchy* h) {
  const char* file = std::getenv("TESSERA_HW_FILE");
  if (!file || !*file) return;
  try {
    util::Json j = util::read_json_file(file);
    if (j.is_object() && (j.contains("memory_levels") || j.contains("compute"))) {
      *h = memory_hierarchy_from_json(j, *h);
    }
  } catch (const util::JsonError& e) {
    throw std::runtime_error(std::string("TESSERA_HW_FILE=") + file + ": " + e.what());
  }
}

}  // namespace

double MemoryHierarchy::ghz() const {
  double per_cycle = 2.0 * fma_ports * vector_lanes;
  return fp32_gflops_core > 0 ? fp32_gflops_core / per_cycle : 2.5;
}

const MemoryLevel& MemoryHierarchy::level(const std::string& name) const {
  for (const MemoryLevel& l : levels) {
    if (l.name == name) return l;
  }
  throw std::runtime_error("memory hierarchy has no level '" + name + "'");
}

MemoryHierarchy modeled_memory_hierarchy() {
  HardwareInfo hw = host_hardware(true);
  MemoryHierarchy h;
  h.cores = hw.num_cores;
  h.vector_lanes = std::max(1, hw.vector_bits / 32);
  h.num_vector_registers = hw.num_vector_registers;
  h.fp32_gflops_core = hw.peak.fp32_gflops_1core > 0 ? hw.peak.fp32_gflops_1core : 50.0;
  h.dram_bw_all_gbs = hw.peak.mem_bw_gbs_all > 0 ? hw.peak.mem_bw_gbs_all : 20.0;
  const double ghz = h.ghz();
  const int64_t l1 = cache_size(hw, 1) > 0 ? cache_size(hw, 1) : 32 << 10;
  const int64_t l2 = cache_size(hw, 2) > 0 ? cache_size(hw, 2) : 1 << 20;
  const int64_t l3 = cache_size(hw, 3);  // 0: no LLC beyond the L2
  int line = 64;
  if (!hw.caches.empty()) line = hw.caches.front().line_bytes;
  const double vec_bytes = h.vector_lanes * 4.0;
  MemoryLevel dram{"dram", 0, line, hw.peak.mem_bw_gbs_1core > 0 ? hw.peak.mem_bw_gbs_1core : 10.0,
                   90.0};
  // Textbook ratios: L2 delivers about one line per 2-3 cycles, L1 two vector loads per cycle.
  // An L3 slice delivers a line per 5 or so cycles to one core, at 40-50 cycles of latency.
  MemoryLevel llc{"llc", l3, line, std::max(dram.bandwidth_gbs, line / 5.0 * ghz), 45.0 / ghz};
  MemoryLevel l2l{"l2", l2, line, line / 2.5 * ghz, 14.0 / ghz};
  MemoryLevel l1l{"l1", l1, line, h.load_ports * vec_bytes * ghz, 5.0 / ghz};
  // Registers: what the FMA ports consume (3 vector operands per FMA), one cycle of latency.
  MemoryLevel reg{"reg", static_cast<int64_t>(h.num_vector_registers * vec_bytes),
                  static_cast<int>(vec_bytes), 3.0 * h.fma_ports * vec_bytes * ghz, 1.0 / ghz};
  if (int w = sysfs_ways(1); w > 0) l1l.ways = w;
  if (int w = sysfs_ways(2); w > 0) l2l.ways = w;
  if (int w = sysfs_ways(3); w > 0) llc.ways = w;
  h.levels = {dram, llc, l2l, l1l, reg};
  return h;
}

MemoryHierarchy probe_memory_hierarchy() {
  MemoryHierarchy h = modeled_memory_hierarchy();
  ReadKernel kernel = pick_read_kernel(host_isa());
  MemoryLevel& l1 = h.levels[kLevelL1];
  MemoryLevel& l2 = h.levels[kLevelL2];
  MemoryLevel& dram = h.levels[kLevelDram];
  double bw1 = read_bandwidth_gbs(l1.capacity_bytes / 2, kernel);
  double bw2 = read_bandwidth_gbs(l2.capacity_bytes / 2, kernel);
  if (sane(bw1)) l1.bandwidth_gbs = bw1;
  if (sane(bw2)) l2.bandwidth_gbs = std::min(bw2, l1.bandwidth_gbs);
  double lat1 = chase_latency_ns(l1.capacity_bytes / 2, 1 << 20);
  double lat2 = chase_latency_ns(l2.capacity_bytes / 2, 1 << 19);
  // 64 MiB: at the edge of what one VM's share of a big L3 keeps (see probe_llc): mostly DRAM.
  double latd = chase_latency_ns(int64_t{64} << 20, 1 << 17);
  if (sane(lat1)) l1.latency_ns = lat1;
  if (sane(lat2)) l2.latency_ns = std::max(lat2, l1.latency_ns);
  if (sane(latd)) dram.latency_ns = std::max(latd, l2.latency_ns);
  probe_llc(kernel, l2, dram, &h.levels[kLevelLlc]);
  return h;
}

util::Json memory_hierarchy_to_json(const MemoryHierarchy& h) {
  util::Json j = util::Json::object();
  util::Json levels = util::Json::array();
  for (const MemoryLevel& l : h.levels) {
    levels.push_back(util::Json::object({{"name", l.name},
                                         {"capacity_bytes", l.capacity_bytes},
                                         {"line_bytes", l.line_bytes},
                                         {"bandwidth_gbs", l.bandwidth_gbs},
                                         {"latency_ns", l.latency_ns},
                                         {"ways", l.ways}}));
  }
  j["memory_levels"] = levels;
  j["compute"] = util::Json::object({{"cores", h.cores},
                                     {"vector_lanes", h.vector_lanes},
                                     {"num_vector_registers", h.num_vector_registers},
                                     {"fp32_gflops_core", h.fp32_gflops_core},
                                     {"dram_bw_all_gbs", h.dram_bw_all_gbs},
                                     {"fma_latency_cycles", h.fma_latency_cycles},
                                     {"fma_ports", h.fma_ports},
                                     {"load_ports", h.load_ports}});
  return j;
}

MemoryHierarchy memory_hierarchy_from_json(const util::Json& json, const MemoryHierarchy& base) {
  if (!json.is_object()) throw util::JsonError("memory hierarchy must be a JSON object");
  MemoryHierarchy h = base;
  if (const util::Json* levels = json.find("memory_levels")) {
    for (const util::Json& lj : levels->as_array()) {
      const std::string name = lj.at("name").as_string();
      auto it = std::find_if(h.levels.begin(), h.levels.end(),
                             [&](const MemoryLevel& l) { return l.name == name; });
      if (it == h.levels.end()) throw util::JsonError("unknown memory level '" + name + "'");
      it->capacity_bytes = lj.get_int("capacity_bytes", it->capacity_bytes);
      it->line_bytes = static_cast<int>(lj.get_int("line_bytes", it->line_bytes));
      it->bandwidth_gbs = lj.get_double("bandwidth_gbs", it->bandwidth_gbs);
      it->latency_ns = lj.get_double("latency_ns", it->latency_ns);
      it->ways = static_cast<int>(lj.get_int("ways", it->ways));
      if (it->capacity_bytes < 0 || it->line_bytes <= 0 || !sane(it->bandwidth_gbs) ||
          it->latency_ns < 0 || it->ways <= 0) {
        throw util::JsonError("memory level '" + name + "' has an invalid field");
      }
    }
  }
  if (const util::Json* c = json.find("compute")) {
    h.cores = static_cast<int>(c->get_int("cores", h.cores));
    h.vector_lanes = static_cast<int>(c->get_int("vector_lanes", h.vector_lanes));
    h.num_vector_registers =
        static_cast<int>(c->get_int("num_vector_registers", h.num_vector_registers));
    h.fp32_gflops_core = c->get_double("fp32_gflops_core", h.fp32_gflops_core);
    h.dram_bw_all_gbs = c->get_double("dram_bw_all_gbs", h.dram_bw_all_gbs);
    h.fma_latency_cycles = c->get_double("fma_latency_cycles", h.fma_latency_cycles);
    h.fma_ports = static_cast<int>(c->get_int("fma_ports", h.fma_ports));
    h.load_ports = static_cast<int>(c->get_int("load_ports", h.load_ports));
    if (h.cores < 1 || h.vector_lanes < 1 || h.num_vector_registers < 1 ||
        !sane(h.fp32_gflops_core) || !sane(h.dram_bw_all_gbs) || !sane(h.fma_latency_cycles) ||
        h.fma_ports < 1 || h.load_ports < 1) {
      throw util::JsonError("memory hierarchy 'compute' has an invalid field");
    }
  }
  return h;
}

MemoryHierarchy host_memory_hierarchy(bool refresh) {
  static std::mutex mu;
  static std::map<std::string, MemoryHierarchy> memo;
  std::lock_guard<std::mutex> lock(mu);
  const std::string key = cache_key();
  MemoryHierarchy h;
  bool have = false;
  if (!refresh) {
    if (auto it = memo.find(key); it != memo.end()) {
      h = it->second;
      have = true;
    }
  }
  const std::string dir = tessera_cache_dir();
  const std::string path = dir.empty() ? "" : dir + "/memory_levels.json";
  util::Json cache = util::Json::object();
  bool cache_valid = false;
  if (!have && !path.empty()) {
    try {
      cache = util::read_json_file(path);
      cache_valid = cache.is_object() && cache.get_int("version", 0) == kCacheVersion &&
                    cache.contains("entries") && cache.at("entries").is_object();
      if (!refresh && cache_valid) {
        if (const util::Json* e = cache.at("entries").find(key)) {
          const MemoryHierarchy modeled = modeled_memory_hierarchy();
          h = memory_hierarchy_from_json(*e, modeled);
          // The FMA peak follows peak.json, whose entry is checked against the machine on load.
          h.fp32_gflops_core = modeled.fp32_gflops_core;
          have = true;
        }
      }
    } catch (const util::JsonError&) {
      cache_valid = false;  // missing or corrupt: re-probed and rewritten below
    }
  }
  if (!have) {
    h = probe_memory_hierarchy();
    if (!path.empty()) {
      if (!cache_valid) {
        cache = util::Json::object();
        cache["version"] = kCacheVersion;
        cache["entries"] = util::Json::object();
      }
      cache["entries"][key] = memory_hierarchy_to_json(h);
      std::string error;
      util::write_json_file(path, cache, 2, &error);  // failure only costs a re-probe later
    }
  }
  memo[key] = h;
  overlay_from_hw_file(&h);
  return h;
}

}  // namespace tessera::cost
