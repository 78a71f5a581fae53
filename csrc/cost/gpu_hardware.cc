#include "cost/gpu_hardware.h"

#include "runtime/cuda/cuda_module.h"
#include "runtime/cuda/driver_api.h"
#include "util/check.h"

namespace tessera::cost {

namespace {

// cuDeviceGetAttribute codes (values of cuda.h's CUdevice_attribute).
constexpr int kAttrMaxThreadsPerBlock = 1;
constexpr int kAttrWarpSize = 10;
constexpr int kAttrClockRateKhz = 13;
constexpr int kAttrMultiprocessorCount = 16;
constexpr int kAttrMaxThreadsPerSm = 39;
constexpr int kAttrMaxSharedPerSm = 81;
constexpr int kAttrMaxRegistersPerSm = 82;
constexpr int kAttrMaxBlocksPerSm = 106;

}  // namespace

GpuHardware h100_sxm() {
  GpuHardware hw;
  hw.name = "NVIDIA H100 SXM5 (shipped description)";
  hw.arch = "sm_90";
  hw.sms = 132;
  hw.shared_bytes_per_sm = 228 * 1024;
  hw.clock_hz = 1.98e9;
  // 128 fp32 FMA lanes per SM.
  hw.fp32_flops = 2.0 * 128 * hw.sms * hw.clock_hz;
  hw.dram_bytes_per_s = 3.35e12;
  return hw;
}

GpuHardware probe_gpu_hardware(int ordinal) {
  std::string why_not;
  const runtime::cuda::DriverApi* api = runtime::cuda::driver_api(&why_not);
  TESSERA_CHECK(api) << "probe_gpu_hardware: " << why_not;
  const runtime::cuda::CudaDeviceInfo info = runtime::cuda::cuda_device_info(ordinal);
  int dev = 0;
  runtime::cuda::check_cuda(*api, api->DeviceGet(&dev, ordinal), "cuDeviceGet");
  auto attr = [&](int code) {
    int v = 0;
    runtime::cuda::check_cuda(*api, api->DeviceGetAttribute(&v, code, dev), "cuDeviceGetAttribute");
    return v;
  };
  const GpuHardware ref = h100_sxm();
  GpuHardware hw = ref;
  hw.name = info.name;
  hw.arch = info.arch();
  hw.sms = attr(kAttrMultiprocessorCount);
  hw.warp_size = attr(kAttrWarpSize);
  hw.max_threads_per_block = attr(kAttrMaxThreadsPerBlock);
  hw.max_threads_per_sm = attr(kAttrMaxThreadsPerSm);
  hw.max_blocks_per_sm = attr(kAttrMaxBlocksPerSm);
  hw.shared_bytes_per_sm = attr(kAttrMaxSharedPerSm);
  hw.registers_per_sm = attr(kAttrMaxRegistersPerSm);
  hw.clock_hz = attr(kAttrClockRateKhz) * 1e3;
  // Throughputs scale with SMs x clock from the reference part (a bandwidth probe would be
  // better for memory; until then the reference's bandwidth stands).
  hw.fp32_flops = ref.fp32_flops * (hw.sms * hw.clock_hz) / (ref.sms * ref.clock_hz);
  return hw;
}

util::Json gpu_hardware_to_json(const GpuHardware& hw) {
  util::Json j = util::Json::object();
  j["name"] = hw.name;
  j["arch"] = hw.arch;
  j["sms"] = hw.sms;
  j["warp_size"] = hw.warp_size;
  j["max_threads_per_block"] = hw.max_threads_per_block;
  j["max_threads_per_sm"] = hw.max_threads_per_sm;
  j["max_blocks_per_sm"] = hw.max_blocks_per_sm;
  j["shared_bytes_per_block"] = hw.shared_bytes_per_block;
  j["shared_bytes_per_sm"] = hw.shared_bytes_per_sm;
  j["registers_per_sm"] = hw.registers_per_sm;
  j["clock_hz"] = hw.clock_hz;
  j["fp32_flops"] = hw.fp32_flops;
  j["dram_bytes_per_s"] = hw.dram_bytes_per_s;
  return j;
}

}  // namespace tessera::cost
