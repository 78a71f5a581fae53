#include "runtime/cuda/ptxas_info.h"

#include <algorithm>
#include <regex>
#include <sstream>

namespace tessera::runtime::cuda {

namespace {

// The integer before `unit` in `line` ("56 registers", "16384 bytes smem"), or -1.
int64_t number_before(const std::string& line, const std::string& unit) {
  const std::regex re("([0-9]+) " + unit);
  std::smatch m;
  if (!std::regex_search(line, m, re)) return -1;
  return std::stoll(m[1].str());
}

}  // namespace

PtxasInfo parse_ptxas_info(const std::string& log) {
  PtxasInfo info;
  std::istringstream in(log);
  std::string line;
  while (std::getline(in, line)) {
    if (const int64_t regs = number_before(line, "registers"); regs >= 0) {
      info.found = true;
      info.registers = std::max(info.registers, regs);
      info.shared_bytes = std::max(info.shared_bytes, number_before(line, "bytes smem"));
    }
    if (const int64_t stores = number_before(line, "bytes spill stores"); stores >= 0) {
      info.spill_store_bytes += stores;
      info.spill_load_bytes += std::max<int64_t>(0, number_before(line, "bytes spill loads"));
      info.stack_bytes = std::max(info.stack_bytes, number_before(line, "bytes stack frame"));
    }
  }
  return info;
}

}  // namespace tessera::runtime::cuda
