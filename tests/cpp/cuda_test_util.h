#pragma once
// Helpers shared by the CUDA code generator tests (test_cuda_*.cc): compiling generated CUDA C
// with nvcc (tests skip when there is none) and checking the source text.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

namespace tessera::codegen::cuda_test {

// Target of the compile checks: sm_90 (Hopper), the lent machines' GPUs.
constexpr const char* kCudaArch = "sm_90";

// The nvcc the build found (TESSERA_NVCC_EXECUTABLE), else one on PATH, else none.
inline std::optional<std::string> find_nvcc() {
#ifdef TESSERA_NVCC_EXECUTABLE
  if (std::filesystem::exists(TESSERA_NVCC_EXECUTABLE)) return std::string(TESSERA_NVCC_EXECUTABLE);
#endif
  if (std::system("command -v nvcc > /dev/null 2>&1") == 0) return std::string("nvcc");
  return std::nullopt;
}

inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Compiles `source` to a cubin for kCudaArch in a fresh temporary directory, warnings counting
// as errors (generated code must compile cleanly). Returns the
// empty string on success, otherwise nvcc's exit status and messages.
inline std::string nvcc_compile(const std::string& nvcc, const std::string& source,
                                const std::string& name) {
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::temp_directory_path() / ("tessera_cuda_" + name + "_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path cu = dir / (name + ".cu"), cubin = dir / (name + ".cubin"), log = dir / "log";
  std::ofstream(cu) << source;
  const std::string cmd = "\"" + nvcc + "\" -cubin -arch=" + kCudaArch +
                          " -Werror all-warnings -o \"" + cubin.string() + "\" \"" + cu.string() +
                          "\" > \"" + log.string() + "\" 2>&1";
  const int rc = std::system(cmd.c_str());
  std::string result;
  if (rc != 0 || !fs::exists(cubin) || fs::file_size(cubin) == 0) {
    result = "nvcc exit status " + std::to_string(rc) + ":\n" + read_text(log);
  }
  fs::remove_all(dir);
  return result;
}

// Skips the calling test when there is no nvcc; otherwise expects `source` to compile.
#define TESSERA_EXPECT_NVCC_COMPILES(source, name)                                                \
  do {                                                                                            \
    const std::optional<std::string> nvcc_ = ::tessera::codegen::cuda_test::find_nvcc();          \
    if (!nvcc_) GTEST_SKIP() << "nvcc not found: CUDA source not compiled";                       \
    const std::string error_ = ::tessera::codegen::cuda_test::nvcc_compile(*nvcc_, source, name); \
    EXPECT_EQ(error_, "") << "source:\n" << (source);                                             \
  } while (0)

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace tessera::codegen::cuda_test
