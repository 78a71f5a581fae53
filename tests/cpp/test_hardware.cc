// Tests for the hardware description and the peak probe: sysfs parsing on a fake tree, the
// TESSERA_HW_FILE override, JSON round trips, probe sanity (no timing thresholds beyond "positive
// and finite" and "all cores not slower than half of one core") and the on-disk peak cache.

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string>

#include "cost/hardware.h"
#include "cost/peak_probe.h"
#include "temp_dir.h"
#include "util/json.h"

namespace tessera::cost {
namespace {

// Sets an environment variable for the lifetime of the object, restoring the old value after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) {
      had_old_ = true;
      old_ = old;
    }
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (had_old_) {
      setenv(name_, old_.c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  bool had_old_ = false;
  std::string old_;
};

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

void make_cache_index(const std::string& root, int index, const std::string& type, int level,
                      const std::string& size, int line, const std::string& shared) {
  std::string dir = root + "/index" + std::to_string(index);
  ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
  write_file(dir + "/type", type + "\n");
  write_file(dir + "/level", std::to_string(level) + "\n");
  write_file(dir + "/size", size + "\n");
  write_file(dir + "/coherency_line_size", std::to_string(line) + "\n");
  write_file(dir + "/shared_cpu_list", shared + "\n");
}

TEST(Hardware, ParsesSysfsCacheTreeAndSkipsInstructionCaches) {
  const testing::TempDir dir("tessera-hw");
  const std::string& root = dir.path();
  make_cache_index(root, 0, "Data", 1, "48K", 64, "0");
  make_cache_index(root, 1, "Instruction", 1, "32K", 64, "0");
  make_cache_index(root, 2, "Unified", 2, "2048K", 64, "0");
  make_cache_index(root, 3, "Unified", 3, "260M", 128, "0-1");
  std::vector<CacheLevel> caches = read_caches_from_sysfs(root);
  ASSERT_EQ(caches.size(), 3u);
  EXPECT_EQ(caches[0].level, 1);
  EXPECT_EQ(caches[0].size_bytes, 48 << 10);
  EXPECT_FALSE(caches[0].shared);
  EXPECT_EQ(caches[1].level, 2);
  EXPECT_EQ(caches[1].size_bytes, 2048 << 10);
  EXPECT_EQ(caches[2].level, 3);
  EXPECT_EQ(caches[2].size_bytes, int64_t{260} << 20);
  EXPECT_EQ(caches[2].line_bytes, 128);
  EXPECT_TRUE(caches[2].shared);
}

TEST(Hardware, UnreadableSysfsGivesDefaults) {
  const testing::TempDir dir("tessera-hw");
  const std::string& root = dir.path();
  std::vector<CacheLevel> caches = read_caches_from_sysfs(root + "/missing");
  std::vector<CacheLevel> defaults = default_caches();
  ASSERT_EQ(caches.size(), defaults.size());
  for (size_t i = 0; i < caches.size(); ++i) {
    EXPECT_EQ(caches[i].level, defaults[i].level);
    EXPECT_EQ(caches[i].size_bytes, defaults[i].size_bytes);
  }
  // Garbage sizes are skipped rather than parsed as zero-sized caches.
  make_cache_index(root, 0, "Data", 1, "lots", 64, "0");
  EXPECT_EQ(read_caches_from_sysfs(root).size(), defaults.size());
}

TEST(Hardware, HostDetectionIsConsistentWithIsa) {
  HardwareInfo hw = detect_host_hardware();
  EXPECT_GE(hw.num_cores, 1);
  const std::string isa = host_isa();
  EXPECT_EQ(hw.vector_bits, isa == "avx512" ? 512 : isa == "avx2" ? 256 : 128);
  EXPECT_EQ(hw.num_vector_registers, isa == "avx512" ? 32 : 16);
  ASSERT_FALSE(hw.caches.empty());
  for (size_t i = 1; i < hw.caches.size(); ++i) {
    EXPECT_LE(hw.caches[i - 1].level, hw.caches[i].level);
  }
  EXPECT_GT(cache_size(hw, 1), 0);
  EXPECT_EQ(cache_size(hw, 9), 0);
  EXPECT_FALSE(hw.has_peak);
}

TEST(Hardware, JsonRoundTrip) {
  HardwareInfo hw;
  hw.num_cores = 12;
  hw.vector_bits = 256;
  hw.num_vector_registers = 16;
  hw.caches = {{1, 32 << 10, 64, false}, {2, 1 << 20, 64, false}, {3, 32 << 20, 64, true}};
  hw.has_peak = true;
  hw.peak = {100.5, 1000.25, 12, 20.0, 80.0, "Test CPU", "avx2"};
  HardwareInfo back =
      hardware_from_json(util::Json::parse(hardware_to_json(hw).dump(2)), HardwareInfo{});
  EXPECT_EQ(hardware_to_json(back), hardware_to_json(hw));
  EXPECT_EQ(back.num_cores, 12);
  EXPECT_EQ(back.caches[2].size_bytes, 32 << 20);
  EXPECT_TRUE(back.caches[2].shared);
  EXPECT_TRUE(back.has_peak);
  EXPECT_EQ(back.peak.cpu_model, "Test CPU");
  EXPECT_DOUBLE_EQ(back.peak.fp32_gflops_all, 1000.25);
}

TEST(Hardware, HwFileOverridesOnlyTheFieldsItHas) {
  const testing::TempDir dir("tessera-hw");
  const std::string path = dir.file("hw.json");
  write_file(path, R"({"num_cores": 64, "caches": [{"level": 2, "size_bytes": 1048576},
                                                   {"level": 1, "size_bytes": 32768}],
                      "peak": {"fp32_gflops_1core": 50, "fp32_gflops_all": 3200, "threads": 64,
                               "mem_bw_gbs_1core": 10, "mem_bw_gbs_all": 200,
                               "cpu_model": "Pretend", "isa": "avx512"}})");
  ScopedEnv env("TESSERA_HW_FILE", path);
  HardwareInfo detected = detect_host_hardware();
  HardwareInfo hw = host_hardware(/*with_peak=*/true);  // the file's peak: no probe runs
  EXPECT_EQ(hw.num_cores, 64);
  EXPECT_EQ(hw.vector_bits, detected.vector_bits);  // not in the file: detected value kept
  ASSERT_EQ(hw.caches.size(), 2u);
  EXPECT_EQ(hw.caches[0].level, 1);  // sorted by level
  EXPECT_EQ(hw.caches[0].line_bytes, 64);
  EXPECT_TRUE(hw.has_peak);
  EXPECT_EQ(hw.peak.cpu_model, "Pretend");
  EXPECT_DOUBLE_EQ(hw.peak.fp32_gflops_all, 3200);
}

TEST(Hardware, InvalidHwFileThrowsWithItsPath) {
  const testing::TempDir dir("tessera-hw");
  const std::string path = dir.file("bad.json");
  write_file(path, R"({"num_cores": -4})");
  {
    ScopedEnv env("TESSERA_HW_FILE", path);
    try {
      host_hardware();
      FAIL() << "expected an exception";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("num_cores"), std::string::npos) << e.what();
    }
  }
  write_file(path, "{ not json");
  {
    ScopedEnv env("TESSERA_HW_FILE", path);
    EXPECT_THROW(host_hardware(), std::runtime_error);
  }
  {
    ScopedEnv env("TESSERA_HW_FILE", dir.file("missing.json"));
    EXPECT_THROW(host_hardware(), std::runtime_error);
  }
}

TEST(PeakProbe, PeakJsonValidation) {
  PeakInfo p{100, 150, 2, 10, 20, "cpu", "avx2"};
  util::Json j = peak_to_json(p);
  PeakInfo back = peak_from_json(j);
  EXPECT_EQ(peak_to_json(back), j);
  util::Json missing = j;
  missing.as_object().erase("mem_bw_gbs_all");
  EXPECT_THROW(peak_from_json(missing), util::JsonError);
  util::Json negative = j;
  negative["fp32_gflops_1core"] = -1.0;
  EXPECT_THROW(peak_from_json(negative), util::JsonError);
  util::Json wrong_type = j;
  wrong_type["threads"] = "two";
  EXPECT_THROW(peak_from_json(wrong_type), util::JsonError);
}

const PeakInfo& probed_once() {
  static const PeakInfo info = probe_peak();
  return info;
}

TEST(PeakProbe, MeasuredNumbersAreSane) {
  const PeakInfo& p = probed_once();
  EXPECT_EQ(p.threads, host_cpu_count());
  EXPECT_EQ(p.isa, host_isa());
  EXPECT_EQ(p.cpu_model, host_cpu_model());
  EXPECT_FALSE(p.cpu_model.empty());
  for (double v : {p.fp32_gflops_1core, p.fp32_gflops_all, p.mem_bw_gbs_1core, p.mem_bw_gbs_all}) {
    EXPECT_TRUE(std::isfinite(v));
    EXPECT_GT(v, 0);
  }
  // No ratio between the one-core and all-core numbers is asserted: tests run concurrently
  // (ctest -j), so the all-core probe may share its cores with another test.
  std::printf("[ peak     ] %s\n", peak_to_json(p).dump().c_str());
}

TEST(PeakProbe, CacheRoundTripCorruptionAndRefresh) {
  const testing::TempDir root("tessera-hw");
  const std::string dir = root.file("nested/cache");  // created on demand
  ScopedEnv env("TESSERA_CACHE_DIR", dir);
  EXPECT_EQ(tessera_cache_dir(), dir);
  const std::string path = dir + "/peak.json";
  const std::string key = peak_cache_key(host_cpu_model(), host_cpu_count());

  // 1. Cold cache: probes (or reuses this process's earlier probe) and writes the file.
  PeakInfo first = get_peak_info();
  EXPECT_GT(first.fp32_gflops_1core, 0);
  util::Json file = util::read_json_file(path);
  EXPECT_EQ(file.at("version").as_int(), 1);
  EXPECT_EQ(file.at("entries").at(key), peak_to_json(first));

  // 2. A warm cache is what get_peak_info returns: plant a recognisable value.
  file["entries"][key]["fp32_gflops_1core"] = 12345.0;
  file["entries"]["Other CPU|threads=99"] = peak_to_json(first);  // unrelated entries survive
  std::string error;
  ASSERT_TRUE(util::write_json_file(path, file, 2, &error)) << error;
  EXPECT_DOUBLE_EQ(get_peak_info().fp32_gflops_1core, 12345.0);

  // 2b. An entry far below what the machine does now (a probe taken under load) is re-probed.
  file["entries"][key]["fp32_gflops_1core"] = 1.0;
  ASSERT_TRUE(util::write_json_file(path, file, 2, &error)) << error;
  EXPECT_GT(get_peak_info().fp32_gflops_1core, 1.15);
  EXPECT_GT(util::read_json_file(path).at("entries").at(key).at("fp32_gflops_1core").as_double(),
            1.15);

  // 3. refresh=true ignores the cache, re-probes and overwrites the entry.
  PeakInfo fresh = get_peak_info(/*refresh=*/true);
  EXPECT_NE(fresh.fp32_gflops_1core, 12345.0);
  file = util::read_json_file(path);
  EXPECT_EQ(file.at("entries").at(key), peak_to_json(fresh));
  EXPECT_TRUE(file.at("entries").contains("Other CPU|threads=99"));

  // 4. A corrupt file is replaced by a valid one instead of failing.
  write_file(path, "{\"version\": 1, \"entries\": {oops");
  PeakInfo after_corruption = get_peak_info();
  EXPECT_GT(after_corruption.fp32_gflops_1core, 0);
  EXPECT_NE(after_corruption.fp32_gflops_1core, 12345.0);
  util::Json repaired;
  ASSERT_TRUE(util::Json::try_parse(
      [&] {
        std::ifstream in(path);
        return std::string(std::istreambuf_iterator<char>(in), {});
      }(),
      &repaired, &error))
      << error;
  EXPECT_TRUE(repaired.at("entries").contains(key));

  // 5. A damaged entry (bad value) is re-probed too.
  repaired["entries"][key]["threads"] = 0;
  ASSERT_TRUE(util::write_json_file(path, repaired, 2, &error)) << error;
  EXPECT_GE(get_peak_info().threads, 1);
}

}  // namespace
}  // namespace tessera::cost
