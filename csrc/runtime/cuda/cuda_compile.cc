#include "runtime/cuda/cuda_compile.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <regex>
#include <sstream>
#include <vector>

#include "runtime/cuda/nvrtc_api.h"
#include "util/check.h"

namespace tessera::runtime::cuda {

namespace fs = std::filesystem;

namespace {

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// First line of a command's standard output, or "" when it fails.
std::string command_output(const std::string& cmd) {
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return "";
  char buf[4096];
  std::string out = std::fgets(buf, sizeof(buf), p) ? buf : "";
  const int rc = ::pclose(p);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return rc == 0 ? out : "";
}

std::string quote(const std::string& s) { return "'" + s + "'"; }

// A fresh private directory for one nvcc run, removed with the object.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "tessera_nvcc_XXXXXX").string();
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    TESSERA_CHECK(::mkdtemp(buf.data())) << "compile_cuda: cannot create a temporary directory";
    path_ = buf.data();
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

CompiledCuda compile_with_nvcc(const std::string& source, const std::string& arch) {
  const std::string nvcc = find_nvcc();
  TESSERA_CHECK(!nvcc.empty()) << "compile_cuda: no nvcc found";
  TempDir dir;
  const fs::path cu = dir.path() / "kernel.cu", cubin = dir.path() / "kernel.cubin",
                 log = dir.path() / "log";
  std::ofstream(cu) << source;
  const std::string cmd = quote(nvcc) + " -cubin -arch=" + arch + " -Xptxas -v -o " +
                          quote(cubin.string()) + " " + quote(cu.string()) + " > " +
                          quote(log.string()) + " 2>&1";
  const int rc = std::system(cmd.c_str());
  CompiledCuda r;
  r.compiler = CudaCompiler::kNvcc;
  r.log = read_file(log);
  TESSERA_CHECK(rc == 0 && fs::exists(cubin))
      << "compile_cuda: nvcc failed (exit status " << rc << "):\n"
      << r.log;
  r.cubin = read_file(cubin);
  return r;
}

// One NVRTC compile with `options`; false (log filled) when it fails.
bool nvrtc_try(const NvrtcApi& api, const std::string& source,
               const std::vector<std::string>& options, CompiledCuda* r) {
  NvrtcApi::Program prog = nullptr;
  int rc = api.CreateProgram(&prog, source.c_str(), "kernel.cu", 0, nullptr, nullptr);
  TESSERA_CHECK(rc == 0) << "NVRTC: cannot create a program: " << api.GetErrorString(rc);
  std::vector<const char*> opts;
  for (const std::string& o : options) opts.push_back(o.c_str());
  rc = api.CompileProgram(prog, static_cast<int>(opts.size()), opts.data());
  size_t log_size = 0;
  api.GetProgramLogSize(prog, &log_size);
  std::string log(log_size, '\0');
  if (log_size > 0) api.GetProgramLog(prog, log.data());
  while (!log.empty() && log.back() == '\0') log.pop_back();
  r->log = log;
  if (rc == 0) {
    size_t size = 0;
    rc = api.GetCUBINSize(prog, &size);
    r->cubin.assign(size, '\0');
    if (rc == 0 && size > 0) rc = api.GetCUBIN(prog, r->cubin.data());
    if (rc != 0) r->log += std::string("\nNVRTC: no cubin: ") + api.GetErrorString(rc);
  } else {
    r->log += std::string("\nNVRTC: ") + api.GetErrorString(rc);
  }
  api.DestroyProgram(&prog);
  return rc == 0 && !r->cubin.empty();
}

CompiledCuda compile_with_nvrtc(const std::string& source, const std::string& arch) {
  std::string why_not;
  const NvrtcApi* api = nvrtc_api(&why_not);
  TESSERA_CHECK(api) << "compile_cuda: " << why_not;
  CompiledCuda r;
  r.compiler = CudaCompiler::kNvrtc;
  const std::string target = "--gpu-architecture=" + arch;  // sm_XX: a cubin, not PTX
  // ptxas's report, where this NVRTC accepts the option; without it the compile still counts.
  if (nvrtc_try(*api, source, {target, "--ptxas-options=-v"}, &r)) return r;
  const std::string first_log = r.log;
  TESSERA_CHECK(nvrtc_try(*api, source, {target}, &r)) << "compile_cuda: NVRTC failed:\n"
                                                       << first_log;
  return r;
}

struct CacheEntry {
  std::string source, arch;
  CompiledCuda result;
};

std::mutex cache_mu;
std::map<uint64_t, CacheEntry> cache;  // guarded by cache_mu
CudaCompileCounts counts;              // guarded by cache_mu

}  // namespace

const char* cuda_compiler_name(CudaCompiler c) {
  switch (c) {
    case CudaCompiler::kNone:
      return "none";
    case CudaCompiler::kNvrtc:
      return "nvrtc";
    case CudaCompiler::kNvcc:
      return "nvcc";
  }
  return "?";
}

std::string find_nvcc() {
  if (const char* env = std::getenv("TESSERA_NVCC"); env && fs::exists(env)) return env;
#ifdef TESSERA_NVCC_EXECUTABLE
  if (fs::exists(TESSERA_NVCC_EXECUTABLE)) return TESSERA_NVCC_EXECUTABLE;
#endif
  return command_output("command -v nvcc 2>/dev/null");
}

CudaCompiler available_cuda_compiler() {
  if (nvrtc_api()) return CudaCompiler::kNvrtc;
  if (!find_nvcc().empty()) return CudaCompiler::kNvcc;
  return CudaCompiler::kNone;
}

uint64_t cuda_source_hash(const std::string& source, const std::string& arch,
                          CudaCompiler compiler) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a offset basis
  auto mix = [&](const std::string& s) {
    for (unsigned char c : s) {
      h ^= c;
      h *= 1099511628211ull;  // FNV prime
    }
    h ^= 0xff;  // separator, so that ("ab", "c") and ("a", "bc") differ
    h *= 1099511628211ull;
  };
  mix(source);
  mix(arch);
  mix(cuda_compiler_name(compiler));
  return h;
}

CompiledCuda compile_cuda(const std::string& source, const CudaCompileOptions& options) {
  // The architecture reaches a shell command line: only sm_NN / sm_NNa / compute_NN pass.
  static const std::regex arch_re("(sm|compute)_[0-9]+a?");
  TESSERA_CHECK(std::regex_match(options.arch, arch_re))
      << "compile_cuda: bad architecture '" << options.arch << "' (want e.g. sm_90)";
  const CudaCompiler compiler =
      options.force != CudaCompiler::kNone ? options.force : available_cuda_compiler();
  TESSERA_CHECK(compiler != CudaCompiler::kNone)
      << "compile_cuda: neither NVRTC (tried " << nvrtc_search_text() << ") nor nvcc found";
  const uint64_t key = cuda_source_hash(source, options.arch, compiler);
  if (options.use_cache) {
    std::lock_guard<std::mutex> lock(cache_mu);
    auto it = cache.find(key);
    if (it != cache.end() && it->second.source == source && it->second.arch == options.arch) {
      ++counts.cache_hits;
      CompiledCuda hit = it->second.result;
      hit.from_cache = true;
      return hit;
    }
  }
  CompiledCuda r = compiler == CudaCompiler::kNvrtc ? compile_with_nvrtc(source, options.arch)
                                                    : compile_with_nvcc(source, options.arch);
  r.ptxas = parse_ptxas_info(r.log);
  r.source_hash = key;
  std::lock_guard<std::mutex> lock(cache_mu);
  ++counts.compiles;
  if (options.use_cache) cache[key] = CacheEntry{source, options.arch, r};
  return r;
}

CudaCompileCounts cuda_compile_counts() {
  std::lock_guard<std::mutex> lock(cache_mu);
  return counts;
}

}  // namespace tessera::runtime::cuda
