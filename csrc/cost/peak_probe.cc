#include "cost/peak_probe.h"

#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "cost/hardware.h"

namespace tessera::cost {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Opaque inputs and a sink keep the compiler from constant-folding or discarding the probe loops.
volatile float g_fma_mul = 0.999f;
volatile float g_fma_add = 0.001f;
volatile double g_sink = 0;

// ---------------------------------------------------------------------------------------------
// FMA throughput kernels. Each runs `iters` iterations of independent FMA chains c = c * a + b and
// returns the number of floating-point operations. Enough chains to cover FMA latency (4 cycles)
// times FMA ports (2) with margin, so the loop is bound by throughput, not latency. With a < 1 the
// chains converge to b / (1 - a) = 1: no overflow, no denormals.
// ---------------------------------------------------------------------------------------------
#if defined(__x86_64__) || defined(__i386__)

__attribute__((target("avx512f"))) double fma_avx512(int64_t iters) {
  const __m512 a = _mm512_set1_ps(g_fma_mul);
  const __m512 b = _mm512_set1_ps(g_fma_add);
  __m512 c[16];
  for (int k = 0; k < 16; ++k) c[k] = _mm512_set1_ps(1.0f + 0.01f * static_cast<float>(k));
  for (int64_t i = 0; i < iters; ++i) {
    // Written out (not a loop over k) so each accumulator surely stays in its own register.
    c[0] = _mm512_fmadd_ps(c[0], a, b);
    c[1] = _mm512_fmadd_ps(c[1], a, b);
    c[2] = _mm512_fmadd_ps(c[2], a, b);
    c[3] = _mm512_fmadd_ps(c[3], a, b);
    c[4] = _mm512_fmadd_ps(c[4], a, b);
    c[5] = _mm512_fmadd_ps(c[5], a, b);
    c[6] = _mm512_fmadd_ps(c[6], a, b);
    c[7] = _mm512_fmadd_ps(c[7], a, b);
    c[8] = _mm512_fmadd_ps(c[8], a, b);
    c[9] = _mm512_fmadd_ps(c[9], a, b);
    c[10] = _mm512_fmadd_ps(c[10], a, b);
    c[11] = _mm512_fmadd_ps(c[11], a, b);
    c[12] = _mm512_fmadd_ps(c[12], a, b);
    c[13] = _mm512_fmadd_ps(c[13], a, b);
    c[14] = _mm512_fmadd_ps(c[14], a, b);
    c[15] = _mm512_fmadd_ps(c[15], a, b);
  }
  __m512 sum = c[0];
  for (int k = 1; k < 16; ++k) sum = _mm512_add_ps(sum, c[k]);
  // Stored and summed by hand: GCC 12's _mm512_reduce_add_ps trips -Wuninitialized.
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, sum);
  double total = 0;
  for (float v : lanes) total += v;
  g_sink = g_sink + total;
  return static_cast<double>(iters) * 16 * 16 * 2;
}

__attribute__((target("avx2,fma"))) double fma_avx2(int64_t iters) {
  // 12 accumulators + 2 operands fit in the 16 ymm registers.
  const __m256 a = _mm256_set1_ps(g_fma_mul);
  const __m256 b = _mm256_set1_ps(g_fma_add);
  __m256 c[12];
  for (int k = 0; k < 12; ++k) c[k] = _mm256_set1_ps(1.0f + 0.01f * static_cast<float>(k));
  for (int64_t i = 0; i < iters; ++i) {
    c[0] = _mm256_fmadd_ps(c[0], a, b);
    c[1] = _mm256_fmadd_ps(c[1], a, b);
    c[2] = _mm256_fmadd_ps(c[2], a, b);
    c[3] = _mm256_fmadd_ps(c[3], a, b);
    c[4] = _mm256_fmadd_ps(c[4], a, b);
    c[5] = _mm256_fmadd_ps(c[5], a, b);
    c[6] = _mm256_fmadd_ps(c[6], a, b);
    c[7] = _mm256_fmadd_ps(c[7], a, b);
    c[8] = _mm256_fmadd_ps(c[8], a, b);
    c[9] = _mm256_fmadd_ps(c[9], a, b);
    c[10] = _mm256_fmadd_ps(c[10], a, b);
    c[11] = _mm256_fmadd_ps(c[11], a, b);
  }
  __m256 sum = c[0];
  for (int k = 1; k < 12; ++k) sum = _mm256_add_ps(sum, c[k]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, sum);
  double total = 0;
  for (float v : lanes) total += v;
  g_sink = g_sink + total;
  return static_cast<double>(iters) * 12 * 8 * 2;
}

#endif  // x86

// Portable fallback (SSE on x86-64 after auto-vectorisation at best): separate multiply and add,
// counted as 2 flops like an FMA.
double fma_scalar(int64_t iters) {
  const float a = g_fma_mul, b = g_fma_add;
  float c[16];
  for (int k = 0; k < 16; ++k) c[k] = 1.0f + 0.01f * static_cast<float>(k);
  for (int64_t i = 0; i < iters; ++i) {
    for (int k = 0; k < 16; ++k) c[k] = c[k] * a + b;
  }
  double total = 0;
  for (float v : c) total += v;
  g_sink = g_sink + total;
  return static_cast<double>(iters) * 16 * 2;
}

using FmaKernel = double (*)(int64_t);

FmaKernel pick_fma_kernel(const std::string& isa) {
#if defined(__x86_64__) || defined(__i386__)
  if (isa == "avx512") return fma_avx512;
  if (isa == "avx2") return fma_avx2;
#endif
  (void)isa;
  return fma_scalar;
}

// ---------------------------------------------------------------------------------------------
// STREAM triad a[i] = b[i] + s * c[i] over [begin, end).
// ---------------------------------------------------------------------------------------------
#if defined(__x86_64__) || defined(__i386__)
__attribute__((target("avx512f"))) void triad_avx512(float* a, const float* b, const float* c,
                                                     float s, int64_t n) {
  const __m512 vs = _mm512_set1_ps(s);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(a + i, _mm512_fmadd_ps(vs, _mm512_loadu_ps(c + i), _mm512_loadu_ps(b + i)));
  }
  for (; i < n; ++i) a[i] = b[i] + s * c[i];
}

__attribute__((target("avx2,fma"))) void triad_avx2(float* a, const float* b, const float* c,
                                                    float s, int64_t n) {
  const __m256 vs = _mm256_set1_ps(s);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(a + i, _mm256_fmadd_ps(vs, _mm256_loadu_ps(c + i), _mm256_loadu_ps(b + i)));
  }
  for (; i < n; ++i) a[i] = b[i] + s * c[i];
}
#endif

void triad_scalar(float* a, const float* b, const float* c, float s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
}

using TriadKernel = void (*)(float*, const float*, const float*, float, int64_t);

TriadKernel pick_triad_kernel(const std::string& isa) {
#if defined(__x86_64__) || defined(__i386__)
  if (isa == "avx512") return triad_avx512;
  if (isa == "avx2") return triad_avx2;
#endif
  (void)isa;
  return triad_scalar;
}

// Runs fn(t) for t in [0, threads) on separate threads released at the same instant; returns the
// wall time in seconds from the release until the last one finished. Thread start-up is excluded.
double run_concurrently(int threads, const std::function<void(int)>& fn) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<Clock::time_point> finished(static_cast<size_t>(threads));
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(threads));
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      fn(t);
      finished[static_cast<size_t>(t)] = Clock::now();
    });
  }
  while (ready.load() < threads) std::this_thread::yield();
  const auto start = Clock::now();
  go.store(true, std::memory_order_release);
  for (auto& th : pool) th.join();
  auto last = start;
  for (const auto& f : finished) last = std::max(last, f);
  return std::chrono::duration<double>(last - start).count();
}

// Iteration count that makes one FMA run last about `target_s` seconds on one thread.
int64_t calibrate_fma(FmaKernel kernel, double target_s) {
  int64_t iters = 1 << 14;
  while (true) {
    auto t0 = Clock::now();
    kernel(iters);
    double s = seconds_since(t0);
    if (s >= 0.01 || iters >= (int64_t{1} << 40)) {
      return std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(iters) * target_s / s));
    }
    iters *= 4;
  }
}

constexpr int kRepeats = 3;  // best of: interference only ever makes a run slower

// One thread's FMA rate (GFLOP/s), best of kRepeats runs of about `target_s` seconds each. The
// calibration run also warms up: AVX-512 frequency licences take some microseconds to settle,
// and the first run pays them.
double one_thread_fma_gflops(FmaKernel kernel, double target_s, int64_t* iters_out = nullptr) {
  const int64_t iters = calibrate_fma(kernel, target_s);
  if (iters_out != nullptr) *iters_out = iters;
  double best = 0;
  for (int r = 0; r < kRepeats; ++r) {
    auto t0 = Clock::now();
    double flops = kernel(iters);
    best = std::max(best, flops / seconds_since(t0) * 1e-9);
  }
  return best;
}

void probe_fma(const std::string& isa, int threads, PeakInfo* out) {
  FmaKernel kernel = pick_fma_kernel(isa);
  int64_t iters = 0;
  out->fp32_gflops_1core = one_thread_fma_gflops(kernel, 0.04, &iters);

  double best_all = 0;
  for (int r = 0; r < kRepeats; ++r) {
    std::vector<double> flops(static_cast<size_t>(threads));
    double s =
        run_concurrently(threads, [&](int t) { flops[static_cast<size_t>(t)] = kernel(iters); });
    double total = 0;
    for (double f : flops) total += f;
    best_all = std::max(best_all, total / s * 1e-9);
  }
  out->fp32_gflops_all = best_all;
}

// 2 MiB-aligned buffer with transparent huge pages requested: fewer TLB misses and much faster
// first touch of the large arrays.
struct BigBuffer {
  explicit BigBuffer(size_t bytes) : size(bytes) {
    constexpr size_t kAlign = size_t{2} << 20;
    size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
    ptr = static_cast<float*>(std::aligned_alloc(kAlign, rounded));
    if (ptr) madvise(ptr, rounded, MADV_HUGEPAGE);
  }
  ~BigBuffer() { std::free(ptr); }
  BigBuffer(const BigBuffer&) = delete;
  BigBuffer& operator=(const BigBuffer&) = delete;
  float* ptr = nullptr;
  size_t size;
};

int64_t last_level_cache_bytes() {
  int64_t llc = 0;
  for (const CacheLevel& c : read_caches_from_sysfs("/sys/devices/system/cpu/cpu0/cache")) {
    llc = std::max(llc, c.size_bytes);
  }
  return llc;
}

void probe_bandwidth(const std::string& isa, int threads, PeakInfo* out) {
  TriadKernel triad = pick_triad_kernel(isa);
  // Arrays must dwarf the last-level cache or the probe measures cache bandwidth. Per array:
  // twice the LLC, at least 64 MiB, at most 256 MiB (768 MiB in all). The cap matters on huge-L3
  // server parts: sysfs reports the whole socket's L3 (260 MiB on the Sapphire Rapids dev VM), yet
  // the VM's usable share is far smaller; measured there, 64 MiB arrays already give DRAM numbers
  // and 256 vs 512 MiB arrays agree within noise.
  const int64_t llc = last_level_cache_bytes();
  const int64_t bytes_per_array =
      std::clamp<int64_t>(2 * llc, int64_t{64} << 20, int64_t{256} << 20);
  const int64_t n = bytes_per_array / static_cast<int64_t>(sizeof(float));
  BigBuffer a(static_cast<size_t>(bytes_per_array)), b(static_cast<size_t>(bytes_per_array)),
      c(static_cast<size_t>(bytes_per_array));
  if (!a.ptr || !b.ptr || !c.ptr) return;  // leaves zeros; callers treat them as unknown

  auto slice = [&](int t, int count) {
    int64_t begin = n * t / count, end = n * (t + 1) / count;
    return std::make_pair(begin, end - begin);
  };
  // First touch from the threads that will stream the slices (page placement on NUMA machines).
  run_concurrently(threads, [&](int t) {
    auto [begin, len] = slice(t, threads);
    for (int64_t i = begin; i < begin + len; ++i) {
      a.ptr[i] = 0.0f;
      b.ptr[i] = 1.0f;
      c.ptr[i] = 2.0f;
    }
  });

  const double bytes_moved = 3.0 * static_cast<double>(n) * sizeof(float);
  constexpr int kRepeats = 5;  // passes are short (tens of ms); more tries beat background noise
  const float s = g_fma_mul;

  double best_1 = 0;
  for (int r = 0; r < kRepeats; ++r) {
    auto t0 = Clock::now();
    triad(a.ptr, b.ptr, c.ptr, s, n);
    best_1 = std::max(best_1, bytes_moved / seconds_since(t0) * 1e-9);
  }
  double best_all = 0;
  for (int r = 0; r < kRepeats; ++r) {
    double secs = run_concurrently(threads, [&](int t) {
      auto [begin, len] = slice(t, threads);
      triad(a.ptr + begin, b.ptr + begin, c.ptr + begin, s, len);
    });
    best_all = std::max(best_all, bytes_moved / secs * 1e-9);
  }
  g_sink = g_sink + a.ptr[n / 2];
  out->mem_bw_gbs_1core = best_1;
  out->mem_bw_gbs_all = best_all;
}

bool sane_positive(double v) { return std::isfinite(v) && v > 0; }

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\n\r");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\n\r");
  return s.substr(b, e - b + 1);
}

bool mkdir_p(const std::string& dir) {
  if (dir.empty()) return false;
  for (size_t pos = 1;; ++pos) {
    pos = dir.find('/', pos);
    std::string prefix = dir.substr(0, pos);
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) return false;
    if (pos == std::string::npos) return true;
  }
}

}  // namespace

std::string host_cpu_model() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned regs[12] = {};
  unsigned max_ext = __get_cpuid_max(0x80000000u, nullptr);
  if (max_ext >= 0x80000004u) {
    for (unsigned i = 0; i < 3; ++i) {
      __get_cpuid(0x80000002u + i, &regs[4 * i], &regs[4 * i + 1], &regs[4 * i + 2],
                  &regs[4 * i + 3]);
    }
    char brand[49] = {};
    std::memcpy(brand, regs, 48);
    std::string model = trim(brand);
    if (!model.empty()) return model;
  }
#endif
  return "unknown-cpu";
}

std::string host_isa() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return "avx512";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "avx2";
#endif
  return "sse";
}

int host_cpu_count() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  unsigned hc = std::thread::hardware_concurrency();
  return hc > 0 ? static_cast<int>(hc) : 1;
}

std::string tessera_cache_dir() {
  if (const char* dir = std::getenv("TESSERA_CACHE_DIR"); dir && *dir) return dir;
  if (const char* home = std::getenv("HOME"); home && *home) {
    return std::string(home) + "/.cache/tessera";
  }
  return "";
}

std::string peak_cache_key(const std::string& cpu_model, int threads) {
  return cpu_model + "|threads=" + std::to_string(threads);
}

PeakInfo probe_peak(int threads) {
  PeakInfo info;
  info.threads = threads > 0 ? threads : host_cpu_count();
  info.cpu_model = host_cpu_model();
  info.isa = host_isa();
  probe_fma(info.isa, info.threads, &info);
  probe_bandwidth(info.isa, info.threads, &info);
  return info;
}

util::Json peak_to_json(const PeakInfo& peak) {
  util::Json j = util::Json::object();
  j["fp32_gflops_1core"] = peak.fp32_gflops_1core;
  j["fp32_gflops_all"] = peak.fp32_gflops_all;
  j["threads"] = peak.threads;
  j["mem_bw_gbs_1core"] = peak.mem_bw_gbs_1core;
  j["mem_bw_gbs_all"] = peak.mem_bw_gbs_all;
  j["cpu_model"] = peak.cpu_model;
  j["isa"] = peak.isa;
  return j;
}

PeakInfo peak_from_json(const util::Json& json) {
  PeakInfo p;
  auto positive = [&](const char* key) {
    double v = json.at(key).as_double();
    if (!sane_positive(v)) {
      throw util::JsonError(std::string("peak field '") + key + "' must be positive and finite");
    }
    return v;
  };
  p.fp32_gflops_1core = positive("fp32_gflops_1core");
  p.fp32_gflops_all = positive("fp32_gflops_all");
  p.mem_bw_gbs_1core = positive("mem_bw_gbs_1core");
  p.mem_bw_gbs_all = positive("mem_bw_gbs_all");
  int64_t threads = json.at("threads").as_int();
  if (threads < 1 || threads > 1 << 20) throw util::JsonError("peak field 'threads' must be >= 1");
  p.threads = static_cast<int>(threads);
  p.cpu_model = json.at("cpu_model").as_string();
  p.isa = json.at("isa").as_string();
  return p;
}

// One thread's FMA rate over a few milliseconds, measured once per process: the check of a cached
// probe (get_peak_info).
double quick_fma_gflops(const std::string& isa) {
  static double measured = -1;  // guarded by get_peak_info's lock
  if (measured < 0) measured = one_thread_fma_gflops(pick_fma_kernel(isa), 0.005);
  return measured;
}

PeakInfo get_peak_info(bool refresh) {
  // Within one process the probe runs at most once per key even if the disk cache is unusable.
  static std::mutex mu;
  static std::map<std::string, PeakInfo> memo;
  std::lock_guard<std::mutex> lock(mu);

  const std::string model = host_cpu_model();
  const int threads = host_cpu_count();
  const std::string key = peak_cache_key(model, threads);
  const std::string dir = tessera_cache_dir();
  const std::string path = dir.empty() ? "" : dir + "/peak.json";

  util::Json cache = util::Json::object();
  bool cache_valid = false;
  if (!path.empty()) {
    try {
      cache = util::read_json_file(path);
      cache_valid = cache.is_object() && cache.get_int("version", 0) == 1 &&
                    cache.contains("entries") && cache.at("entries").is_object();
    } catch (const util::JsonError&) {
      cache_valid = false;  // missing or corrupt: rewritten below
    }
    if (!refresh && cache_valid) {
      if (const util::Json* entry = cache.at("entries").find(key)) {
        try {
          // A probe taken while other work shared the cores stays low for good, and every model
          // built on it with it (one here read 168 GFLOP/s per core on a 217 GFLOP/s core). A
          // machine never runs faster than it can, so a quick check that beats the entry by more
          // than noise means the entry is stale: re-probe.
          const PeakInfo cached = peak_from_json(*entry);
          if (quick_fma_gflops(cached.isa) <= 1.15 * cached.fp32_gflops_1core) return cached;
        } catch (const util::JsonError&) {
          // A damaged entry is re-probed and overwritten.
        }
      }
    }
  }

  PeakInfo info;
  auto it = memo.find(key);
  if (!refresh && it != memo.end()) {
    info = it->second;
  } else {
    info = probe_peak(threads);
    memo[key] = info;
  }

  if (!path.empty() && mkdir_p(dir)) {
    if (!cache_valid) {
      cache = util::Json::object();
      cache["version"] = 1;
      cache["entries"] = util::Json::object();
    }
    cache["entries"][key] = peak_to_json(info);
    std::string error;
    util::write_json_file(path, cache, 2, &error);  // failure only costs a re-probe later
  }
  return info;
}

}  // namespace tessera::cost
