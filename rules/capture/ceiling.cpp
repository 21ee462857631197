#include "rules/capture/ceiling.h"

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

namespace {

// The CUDA ceiling, measured with the user's torch: a 1 GiB device-to-device
// copy timed with CUDA events, best of 10.
constexpr const char* kCudaCeiling = R"(
import json, torch
n = 1 << 30
a = torch.empty(n, dtype=torch.uint8, device="cuda"); b = torch.empty_like(a)
best = 0.0
for _ in range(12):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record(); b.copy_(a); e.record(); e.synchronize()
    best = max(best, 2 * n / (s.elapsed_time(e) / 1e3))
print(json.dumps({"bytes_per_second": best}))
)";

nlohmann::json measure_cuda_ceiling(BuildContext& ctx) {
  Command c;
  c.argv = {"python3", "-c", kCudaCeiling};
  c.env["PATH"] = forge_path_env();
  c.timeout_seconds = 300;
  CommandResult r = ctx.runner.run(c);
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  if (!r.ok() || !j.is_object())
    return failed_record("measuring the CUDA copy ceiling failed (" + r.describe() + ")", r.err);
  return {{"status", "ok"},
          {"bytes_per_second", j.value("bytes_per_second", 0.0)},
          {"method", "torch copy_ of 1 GiB on the device, CUDA events, best of 12"}};
}

}  // namespace

std::optional<double> copy_ceiling(BuildContext& ctx) {
  StepSpec spec;
  spec.kind = "ceiling";
  spec.label = "copy bandwidth of " + ctx.device.name;
  spec.name = "ceiling";
  spec.inputs = {{"device", ctx.device.fingerprint()}};
  if (ctx.device.backend == "cuda") spec.inputs.push_back({"torch", ctx.toolchain.torch_version});
  spec.run = [&ctx]() -> nlohmann::json {
    if (ctx.device.backend == "cuda") return measure_cuda_ceiling(ctx);
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
