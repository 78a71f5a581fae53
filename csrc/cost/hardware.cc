#include "cost/hardware.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace tessera::cost {
namespace {

bool read_first_line(const std::string& path, std::string* out) {
  std::ifstream in(path);
  if (!in) return false;
  std::getline(in, *out);
  return !in.bad();
}

// sysfs sizes look like "48K", "2048K", "260M" (binary multiples).
int64_t parse_size(const std::string& text) {
  std::istringstream in(text);
  int64_t value = 0;
  if (!(in >> value) || value <= 0) return 0;
  char unit = 0;
  if (in >> unit) {
    switch (unit) {
      case 'K':
      case 'k':
        value <<= 10;
        break;
      case 'M':
      case 'm':
        value <<= 20;
        break;
      case 'G':
      case 'g':
        value <<= 30;
        break;
      default:
        return 0;
    }
  }
  return value;
}

// "0-1", "0,2-3", "5": more than one CPU means the cache is shared.
bool cpu_list_has_several(const std::string& list) {
  return list.find_first_of(",-") != std::string::npos;
}

}  // namespace

std::vector<CacheLevel> default_caches() {
  // Conservative values that fit essentially every x86 server core of the last decade.
  return {{1, 32 << 10, 64, false}, {2, 1 << 20, 64, false}, {3, 8 << 20, 64, true}};
}

std::vector<CacheLevel> read_caches_from_sysfs(const std::string& cache_dir) {
  std::vector<CacheLevel> caches;
  for (int index = 0; index < 16; ++index) {
    const std::string dir = cache_dir + "/index" + std::to_string(index);
    std::string type, level_text, size_text, line_text, shared_text;
    if (!read_first_line(dir + "/type", &type)) continue;
    if (type == "Instruction") continue;  // kernels only care about data capacity
    if (!read_first_line(dir + "/level", &level_text) ||
        !read_first_line(dir + "/size", &size_text)) {
      continue;
    }
    CacheLevel c;
    c.level = std::atoi(level_text.c_str());
    c.size_bytes = parse_size(size_text);
    if (c.level <= 0 || c.size_bytes <= 0) continue;
    if (read_first_line(dir + "/coherency_line_size", &line_text)) {
      int line = std::atoi(line_text.c_str());
      if (line > 0) c.line_bytes = line;
    }
    c.shared = read_first_line(dir + "/shared_cpu_list", &shared_text) &&
               cpu_list_has_several(shared_text);
    caches.push_back(c);
  }
  if (caches.empty()) return default_caches();
  std::sort(caches.begin(), caches.end(),
            [](const CacheLevel& a, const CacheLevel& b) { return a.level < b.level; });
  return caches;
}

int64_t cache_size(const HardwareInfo& hw, int level) {
  for (const CacheLevel& c : hw.caches) {
    if (c.level == level) return c.size_bytes;
  }
  return 0;
}

HardwareInfo detect_host_hardware() {
  HardwareInfo hw;
  hw.num_cores = host_cpu_count();
  const std::string isa = host_isa();
  hw.vector_bits = isa == "avx512" ? 512 : isa == "avx2" ? 256 : 128;
  hw.num_vector_registers = isa == "avx512" ? 32 : 16;
  hw.caches = read_caches_from_sysfs("/sys/devices/system/cpu/cpu0/cache");
  return hw;
}

util::Json hardware_to_json(const HardwareInfo& hw) {
  util::Json j = util::Json::object();
  j["num_cores"] = hw.num_cores;
  j["vector_bits"] = hw.vector_bits;
  j["num_vector_registers"] = hw.num_vector_registers;
  util::Json caches = util::Json::array();
  for (const CacheLevel& c : hw.caches) {
    caches.push_back(util::Json::object({{"level", c.level},
                                         {"size_bytes", c.size_bytes},
                                         {"line_bytes", c.line_bytes},
                                         {"shared", c.shared}}));
  }
  j["caches"] = caches;
  if (hw.has_peak) j["peak"] = peak_to_json(hw.peak);
  return j;
}

HardwareInfo hardware_from_json(const util::Json& json, const HardwareInfo& base) {
  if (!json.is_object()) throw util::JsonError("hardware description must be a JSON object");
  HardwareInfo hw = base;
  auto positive_int = [&](const char* key, int64_t fallback) {
    int64_t v = json.get_int(key, fallback);
    if (v <= 0 || v > (int64_t{1} << 30)) {
      throw util::JsonError(std::string("hardware field '") + key + "' must be a positive integer");
    }
    return v;
  };
  hw.num_cores = static_cast<int>(positive_int("num_cores", hw.num_cores));
  hw.vector_bits = static_cast<int>(positive_int("vector_bits", hw.vector_bits));
  hw.num_vector_registers =
      static_cast<int>(positive_int("num_vector_registers", hw.num_vector_registers));
  if (const util::Json* caches = json.find("caches")) {
    hw.caches.clear();
    for (const util::Json& c : caches->as_array()) {
      CacheLevel level;
      level.level = static_cast<int>(c.at("level").as_int());
      level.size_bytes = c.at("size_bytes").as_int();
      level.line_bytes = static_cast<int>(c.get_int("line_bytes", 64));
      level.shared = c.get_bool("shared", false);
      if (level.level <= 0 || level.size_bytes <= 0 || level.line_bytes <= 0) {
        throw util::JsonError("cache entries need positive level, size_bytes and line_bytes");
      }
      hw.caches.push_back(level);
    }
    std::sort(hw.caches.begin(), hw.caches.end(),
              [](const CacheLevel& a, const CacheLevel& b) { return a.level < b.level; });
  }
  if (const util::Json* peak = json.find("peak")) {
    hw.peak = peak_from_json(*peak);
    hw.has_peak = true;
  }
  return hw;
}

HardwareInfo host_hardware(bool with_peak) {
  HardwareInfo hw = detect_host_hardware();
  if (const char* file = std::getenv("TESSERA_HW_FILE"); file && *file) {
    try {
      hw = hardware_from_json(util::read_json_file(file), hw);
    } catch (const util::JsonError& e) {
      throw std::runtime_error(std::string("TESSERA_HW_FILE=") + file + ": " + e.what());
    }
  }
  if (with_peak && !hw.has_peak) {
    hw.peak = get_peak_info();
    hw.has_peak = true;
  }
  return hw;
}

}  // namespace tessera::cost
