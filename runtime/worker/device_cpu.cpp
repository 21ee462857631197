// The CPU device: steady-clock timing and a last-level-cache flush by writing a
// buffer at least twice the size of the LLC (64 MiB at least).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "device.h"

namespace forge::worker {
namespace {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) {
        std::string v = line.substr(colon + 1);
        v.erase(0, v.find_first_not_of(" \t"));
        return v;
      }
    }
  }
  return "unknown CPU";
}

size_t llc_bytes() {
  long l3 = ::sysconf(_SC_LEVEL3_CACHE_SIZE);
  long l2 = ::sysconf(_SC_LEVEL2_CACHE_SIZE);
  long best = std::max(l3, l2);
  return best > 0 ? static_cast<size_t>(best) : size_t(32) << 20;
}

class CpuDevice final : public Device {
 public:
  explicit CpuDevice(bool flush_buffer) {
    if (!flush_buffer) return;
    m_flush.resize(std::max(size_t(64) << 20, 2 * llc_bytes()));
    std::memset(m_flush.data(), 1, m_flush.size());  // fault the pages in now
  }

  const char* backend() const override { return "cpu"; }

  std::string name() const override {
    return cpu_model() + " (" + std::to_string(std::thread::hardware_concurrency()) + " threads)";
  }

  void flush_caches(void*) override {
    // Writing (not reading) evicts dirty and clean lines alike; the value
    // changes every time so the stores cannot be elided.
    if (m_flush.empty()) return;
    m_value = static_cast<unsigned char>(m_value + 1);
    std::memset(m_flush.data(), m_value, m_flush.size());
    asm volatile("" : : "r"(m_flush.data()) : "memory");
  }

  double time_us(void*, const std::function<void()>& f) override {
    auto t0 = std::chrono::steady_clock::now();
    f();
    auto t1 = std::chrono::steady_clock::now();
    return std::chrono::duration<double, std::micro>(t1 - t0).count();
  }

  void synchronize(void*) override {}
  std::string check_error(bool* sticky) override {
    if (sticky) *sticky = false;
    return {};
  }
  std::string capture(void*, const std::function<void()>&) override { return {}; }
  std::string replay(void*) override { return {}; }
  double copy_ceiling() override { return 0.0; }
  int64_t free_bytes() override {
    std::FILE* f = std::fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    long long kb = 0;
    while (std::fgets(line, sizeof line, f))
      if (std::sscanf(line, "MemAvailable: %lld kB", &kb) == 1) break;
    std::fclose(f);
    return static_cast<int64_t>(kb) * 1024;
  }

 private:
  std::vector<unsigned char> m_flush;
  unsigned char m_value = 1;
};

}  // namespace

std::unique_ptr<Device> make_cpu_device(bool flush_buffer) { return std::make_unique<CpuDevice>(flush_buffer); }

}  // namespace forge::worker
