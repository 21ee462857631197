#include "rules/ceiling.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

namespace forge {

double measure_memcpy_ceiling(size_t bytes, unsigned threads, int rounds) {
  threads = std::max(1u, threads);
  const size_t per = bytes / threads;
  std::vector<std::unique_ptr<char[]>> src, dst;
  for (unsigned t = 0; t < threads; ++t) {
    src.emplace_back(new char[per]);
    dst.emplace_back(new char[per]);
    std::memset(src.back().get(), 1, per);  // touch every page before timing
    std::memset(dst.back().get(), 0, per);
  }
  double best = 0;
  for (int r = 0; r < rounds; ++r) {
    auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t)
      pool.emplace_back([&, t] { std::memcpy(dst[t].get(), src[t].get(), per); });
    for (auto& th : pool) th.join();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    // A copy reads and writes every byte.
    best = std::max(best, 2.0 * per * threads / s);
  }
  return best;
}

std::optional<double> copy_ceiling(BuildContext& ctx) {
  if (ctx.device.backend != "cpu") return std::nullopt;
  StepSpec spec;
  spec.kind = "ceiling";
  spec.label = "copy bandwidth of " + ctx.device.name;
  spec.name = "ceiling";
  spec.inputs = {{"device", ctx.device.fingerprint()}};
  spec.run = [] {
    const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
    double bps = measure_memcpy_ceiling(size_t{256} << 20, threads, 5);
    return nlohmann::json{{"status", "ok"}, {"bytes_per_second", bps}, {"threads", threads},
                          {"method", "memcpy 256 MiB, best of 5"}};
  };
  auto outcome = ctx.step(spec);
  if (!outcome || !record_ok(outcome->record)) return std::nullopt;
  return outcome->record.value("bytes_per_second", 0.0);
}

}  // namespace forge
