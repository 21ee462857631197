#include "engine/device_facts.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "util/atomic_file.h"

namespace forge {
namespace fs = std::filesystem;
using nlohmann::json;

const std::vector<std::string> kIsaFlags = {
    // x86
    "sse4_2", "avx", "avx2", "fma", "f16c", "bmi2", "avx512f", "avx512dq", "avx512cd", "avx512bw",
    "avx512vl", "avx512_bf16", "avx512_fp16", "avx512vbmi", "avx512_vnni", "avx_vnni", "amx_tile",
    "amx_bf16", "amx_int8",
    // Arm
    "asimd", "asimdhp", "fphp", "bf16", "i8mm", "sve", "sve2"};

namespace {

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

// "32K", "1024K", "1M", "32768 KB" -> bytes; nullopt when unreadable.
std::optional<int64_t> size_bytes(const std::string& text) {
  const std::string t = trim(text);
  size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(t, &used);
  } catch (...) {
    return std::nullopt;
  }
  if (v <= 0) return std::nullopt;
  const std::string unit = trim(t.substr(used));
  const char u = unit.empty() ? 'B' : unit[0];
  if (u == 'K' || u == 'k') return v << 10;
  if (u == 'M' || u == 'm') return v << 20;
  if (u == 'G' || u == 'g') return v << 30;
  if (u == 'B' || u == 'b') return v;
  return std::nullopt;
}

std::string bytes_text(int64_t b) {
  char buf[32];
  if (b >= (int64_t{1} << 30) && b % (int64_t{1} << 30) == 0)
    std::snprintf(buf, sizeof buf, "%lld GiB", static_cast<long long>(b >> 30));
  else if (b >= (int64_t{1} << 30))
    std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(b) / (1 << 30));
  else if (b >= (1 << 20) && b % (1 << 20) == 0)
    std::snprintf(buf, sizeof buf, "%lld MiB", static_cast<long long>(b >> 20));
  else if (b >= (1 << 20))
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(b) / (1 << 20));
  else if (b >= 1024)
    std::snprintf(buf, sizeof buf, "%lld KiB", static_cast<long long>(b >> 10));
  else
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(b));
  return buf;
}

constexpr const char* kCudaProps = R"(
import json, torch
p = torch.cuda.get_device_properties(torch.cuda.current_device())
keys = ["multi_processor_count", "L2_cache_size", "shared_memory_per_block",
        "shared_memory_per_block_optin", "shared_memory_per_multiprocessor",
        "regs_per_multiprocessor", "max_threads_per_multi_processor", "warp_size", "total_memory"]
print(json.dumps({k: getattr(p, k) for k in keys if isinstance(getattr(p, k, None), int)}))
)";

}  // namespace

DeviceFacts cpu_device_facts(const std::string& cpuinfo, const fs::path& cache_dir, int cpus) {
  DeviceFacts f;
  f.cpus = cpus;
  std::istringstream in(cpuinfo);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0 && line.rfind("Features", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::istringstream words(line.substr(colon + 1));
    std::vector<std::string> have;
    for (std::string w; words >> w;) have.push_back(w);
    for (const auto& flag : kIsaFlags)
      if (std::find(have.begin(), have.end(), flag) != have.end()) f.isa.push_back(flag);
    break;  // the first CPU's line speaks for all
  }
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(cache_dir, ec)) {
    if (e.path().filename().string().rfind("index", 0) != 0) continue;
    std::string level, type, size;
    if (!read_file(e.path() / "level", &level) || !read_file(e.path() / "type", &type) ||
        !read_file(e.path() / "size", &size))
      continue;
    const auto bytes = size_bytes(size);
    level = trim(level);
    type = trim(type);
    if (!bytes || type == "Instruction") continue;
    if (level == "1") f.l1d_bytes = bytes;
    if (level == "2") f.l2_bytes = bytes;
    if (level == "3") f.l3_bytes = bytes;
  }
  return f;
}

DeviceFacts cuda_device_facts(const json& p) {
  DeviceFacts f;
  auto get = [&](const char* key) -> std::optional<int64_t> {
    auto it = p.find(key);
    if (it == p.end() || !it->is_number_integer() || it->get<int64_t>() <= 0) return std::nullopt;
    return it->get<int64_t>();
  };
  auto get_int = [&](const char* key) -> std::optional<int> {
    auto v = get(key);
    return v ? std::optional<int>(static_cast<int>(*v)) : std::nullopt;
  };
  f.sms = get_int("multi_processor_count");
  f.l2_bytes = get("L2_cache_size");
  f.smem_per_block = get("shared_memory_per_block");
  f.smem_per_block_optin = get("shared_memory_per_block_optin");
  f.smem_per_sm = get("shared_memory_per_multiprocessor");
  f.regs_per_sm = get_int("regs_per_multiprocessor");
  f.max_threads_per_sm = get_int("max_threads_per_multi_processor");
  f.warp_size = get_int("warp_size");
  f.memory_bytes = get("total_memory");
  return f;
}

std::string DeviceFacts::describe() const {
  std::vector<std::string> parts;
  if (cpus > 0) parts.push_back(std::to_string(cpus) + " logical CPUs");
  if (!isa.empty()) {
    std::string s = "ISA extensions:";
    for (const auto& i : isa) s += " " + i;
    parts.push_back(s);
  }
  if (sms) parts.push_back(std::to_string(*sms) + " SMs");
  if (warp_size) parts.push_back("warp size " + std::to_string(*warp_size));
  std::vector<std::string> caches;
  if (l1d_bytes) caches.push_back("L1d " + bytes_text(*l1d_bytes));
  if (l2_bytes) caches.push_back("L2 " + bytes_text(*l2_bytes));
  if (l3_bytes) caches.push_back("L3 " + bytes_text(*l3_bytes));
  if (!caches.empty()) {
    std::string s = sms ? "" : "caches (cpu0): ";
    for (size_t i = 0; i < caches.size(); ++i) s += (i ? ", " : "") + caches[i];
    parts.push_back(s);
  }
  if (smem_per_block) {
    std::string s = "shared memory " + bytes_text(*smem_per_block) + " per block";
    if (smem_per_block_optin && *smem_per_block_optin != *smem_per_block)
      s += " (" + bytes_text(*smem_per_block_optin) + " opt-in)";
    if (smem_per_sm) s += ", " + bytes_text(*smem_per_sm) + " per SM";
    parts.push_back(s);
  }
  if (regs_per_sm) parts.push_back(std::to_string(*regs_per_sm) + " registers per SM");
  if (max_threads_per_sm) parts.push_back(std::to_string(*max_threads_per_sm) + " threads per SM");
  if (memory_bytes) parts.push_back(bytes_text(*memory_bytes) + " device memory");
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? "; " : "") + parts[i];
  return out.empty() ? out : out + ".";
}

DeviceFacts probe_device_facts(CommandRunner& runner, const DeviceInfo& device) {
  static std::mutex mutex;
  static std::map<std::string, DeviceFacts> known;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = known.find(device.fingerprint());
  if (it != known.end()) return it->second;
  DeviceFacts f;
  if (device.backend == "cuda") {
    Command c;
    c.argv = {"python3", "-c", kCudaProps};
    c.env["PATH"] = forge_path_env();
    c.timeout_seconds = 120;
    CommandResult r = runner.run(c);
    json j = r.ok() ? json::parse(r.out, nullptr, false) : json();
    if (j.is_object()) f = cuda_device_facts(j);
  } else {
    std::string cpuinfo;
    read_file("/proc/cpuinfo", &cpuinfo);
    f = cpu_device_facts(cpuinfo, "/sys/devices/system/cpu/cpu0/cache",
                         static_cast<int>(std::thread::hardware_concurrency()));
  }
  known[device.fingerprint()] = f;
  return f;
}

}  // namespace forge
