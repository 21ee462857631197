// What a kernel writer needs to know about the device beyond its name: the
// CPU's instruction-set extensions, logical CPU count and cache sizes; the GPU's
// SM count, L2 and shared memory. Read from the machine, never guessed: a fact
// that cannot be read is absent.
//
// CPU: the "flags" (x86) or "Features" (Arm) line of /proc/cpuinfo, filtered to
// the extensions in kIsaFlags; L1d/L2/L3 from cpu0's cache index folders
// (/sys/devices/system/cpu/cpu0/cache/index*/{level,type,size}).
// CUDA: torch.cuda.get_device_properties(0) through python3 (forge links no
// CUDA; torch is already what the CUDA backend runs on), one query per process.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/environment.h"
#include "util/process.h"

namespace forge {

struct DeviceFacts {
  // CPU
  std::vector<std::string> isa;  // "avx2", "avx512f", ... in kIsaFlags order
  int cpus = 0;                  // logical CPUs; 0 = unknown
  std::optional<int64_t> l1d_bytes, l3_bytes;
  // Both: the CPU's L2 (per core) or the GPU's L2.
  std::optional<int64_t> l2_bytes;
  // CUDA
  std::optional<int> sms, warp_size, max_threads_per_sm, regs_per_sm;
  std::optional<int64_t> smem_per_block, smem_per_block_optin, smem_per_sm, memory_bytes;

  // One or two lines for a prompt ("" when nothing is known).
  std::string describe() const;
};

// The extensions worth naming to a kernel writer, in the order they are listed.
extern const std::vector<std::string> kIsaFlags;

// CPU facts from /proc/cpuinfo's text and a cache folder (cpu0/cache); `cpus` as counted.
DeviceFacts cpu_device_facts(const std::string& cpuinfo, const std::filesystem::path& cache_dir,
                             int cpus);
// CUDA facts from the JSON the property query prints (keys as torch names them).
DeviceFacts cuda_device_facts(const nlohmann::json& props);

// The facts of `device`: read once per process and device, then remembered
// (thread-safe). The CUDA query runs through `runner`.
DeviceFacts probe_device_facts(CommandRunner& runner, const DeviceInfo& device);

}  // namespace forge
