// What an evaluation may hold (memory_plan.h).
#include "memory_plan.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>

namespace forge::worker {

std::string gigabytes(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GB", static_cast<double>(bytes) / 1e9);
  return buf;
}

MemoryPlan plan_memory(const MemoryNeeds& n) {
  MemoryPlan p;
  p.io_bytes = n.input_bytes + n.output_bytes;
  const int64_t io = p.io_bytes;
  const double f64 = io > 0 ? static_cast<double>(n.float64_bytes) / static_cast<double>(io) : 2.0;
  const int64_t free_limit =
      n.free_bytes > 0 ? static_cast<int64_t>(kFreeShare * static_cast<double>(n.free_bytes)) : INT64_MAX;
  // In multiples of a call's bytes, at the chosen protocol.
  auto verify_x = [&]() { return (p.moved_large ? 4.0 : 3.0) + (p.float64_large ? f64 : 0.0); };
  auto bench_x = [&]() { return 3.0 + p.bench_copies; };
  auto need_at = [&](double growth) {
    return static_cast<int64_t>(std::max(verify_x() * growth, bench_x()) * static_cast<double>(io)) + kSlack;
  };
  auto fits = [&](double growth) {
    return need_at(growth) <= std::min(free_limit, static_cast<int64_t>(kMultiple * growth * io) + kSlack);
  };
  if (!fits(1.0)) {
    p.bench_copies = 1;
    p.notes.push_back("memory: one timed copy instead of three");
  }
  if (!fits(1.0)) {
    p.float64_large = false;
    p.moved_large = false;
    p.notes.push_back("memory: no float64 reference and no run at other addresses at the captured size");
  }
  // The size sweep's largest case, up to 4x the captured call, as far as the
  // free memory allows; the stated multiple applies to that largest case.
  p.sweep_growth = 4.0;
  if (io > 0 && free_limit != INT64_MAX) {
    const double room = static_cast<double>(free_limit - kSlack) / (verify_x() * static_cast<double>(io));
    p.sweep_growth = std::clamp(room, 1.0, 4.0);
  }
  if (p.sweep_growth < 4.0) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "memory: the size sweep stops at %.2fx the captured call's bytes", p.sweep_growth);
    p.notes.push_back(buf);
  }
  p.limit_bytes = std::min(free_limit, static_cast<int64_t>(kMultiple * p.sweep_growth * io) + kSlack);
  p.need_bytes = need_at(p.sweep_growth);
  if (p.need_bytes > p.limit_bytes)
    p.refused = "the call moves " + gigabytes(io) + " (inputs and outputs); verifying it needs at least " +
                gigabytes(need_at(1.0)) + " and " + gigabytes(std::min(free_limit, kMultiple * io + kSlack)) +
                (n.free_bytes > 0 ? " can be held (" + gigabytes(n.free_bytes) + " free on the device)"
                                  : " can be held");
  return p;
}

}  // namespace forge::worker
