// What an evaluation may hold (memory_plan.h).
#include "memory_plan.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>

namespace forge::worker {

std::string gigabytes(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GB", static_cast<double>(bytes) / 1e9);
  return buf;
}

namespace {
constexpr double kJudgeSlack = 0.25;  // in case sizes
}  // namespace

MemoryPlan plan_memory(const MemoryNeeds& n) {
  MemoryPlan p;
  p.io_bytes = n.input_bytes + n.output_bytes;
  const int64_t io = p.io_bytes;
  const double f64 = io > 0 ? static_cast<double>(n.float64_bytes) / static_cast<double>(io) : 2.0;
  const int64_t fixed = n.guard_bytes + kSlack;
  const int64_t free_limit =
      n.free_bytes > 0 ? static_cast<int64_t>(kFreeShare * static_cast<double>(n.free_bytes)) : INT64_MAX;
  // In multiples of the captured call's bytes, at the chosen protocol, for a
  // sweep whose largest case is `growth` times the captured call. Cases under
  // half the captured bytes always get run 4 and the float64 reference.
  auto verify_arena = [&](double growth) { return std::max(growth * (p.moved_large ? 2.0 : 1.0), 1.0); };
  // Two case sizes in the judge, and kJudgeSlack more for the comparison's
  // masks and the allocator's rounding.
  auto verify_judge = [&](double growth) {
    return (2.0 + kJudgeSlack) * growth + f64 * (p.float64_large ? growth : 0.5);
  };
  auto bench_arena = [&]() { return 1.0 + p.bench_copies; };
  auto units = [&](double growth) {
    return std::max(verify_arena(growth) + verify_judge(growth), bench_arena() + 2.0);
  };
  auto need_at = [&](double growth) { return static_cast<int64_t>(units(growth) * static_cast<double>(io)) + fixed; };
  auto limit_at = [&](double growth) {
    const double bytes = std::max(kMultiple * static_cast<double>(io), static_cast<double>(kFloor)) * growth;
    return std::min(free_limit, static_cast<int64_t>(bytes) + fixed);
  };
  auto fits = [&](double growth) { return need_at(growth) <= limit_at(growth); };
  if (!fits(1.0)) {
    p.bench_copies = 1;
    p.notes.push_back("memory: one timed copy instead of three");
  }
  if (!fits(1.0)) {
    p.float64_large = false;
    p.moved_large = false;
    p.notes.push_back("memory: no float64 reference and no run at other addresses from half the captured size");
  }
  // The size sweep's largest case, up to 4x the captured call, as far as the
  // free memory allows; the stated multiple applies to that largest case.
  p.sweep_growth = 4.0;
  if (io > 0 && free_limit != INT64_MAX) {
    double lo = 1.0, hi = 4.0;
    if (fits(hi)) {
      lo = hi;
    } else {
      for (int i = 0; i < 40; ++i) {
        const double mid = 0.5 * (lo + hi);
        (fits(mid) ? lo : hi) = mid;
      }
    }
    p.sweep_growth = lo;
  }
  if (p.sweep_growth < 4.0) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "memory: the size sweep stops at %.2fx the captured call's bytes", p.sweep_growth);
    p.notes.push_back(buf);
  }
  p.limit_bytes = limit_at(p.sweep_growth);
  p.need_bytes = need_at(p.sweep_growth);
  // The concurrent-calls check: a captured-size case per call thread, in the
  // arena and (its reference and snapshot) in the judge.
  auto threads_need = [&](int calls) {
    return static_cast<int64_t>((2.0 + kJudgeSlack) * calls * static_cast<double>(io)) + fixed;
  };
  while (p.thread_calls >= 2 && threads_need(p.thread_calls) > p.limit_bytes) --p.thread_calls;
  if (p.thread_calls < 2) {
    p.thread_calls = 0;
    p.notes.push_back("memory: no concurrent-calls check (two copies of the call do not fit)");
  } else if (p.thread_calls < kMaxThreadCalls) {
    p.notes.push_back("memory: the concurrent-calls check calls at most " + std::to_string(p.thread_calls) +
                      " at once");
  }
  if (p.thread_calls > 0) p.need_bytes = std::max(p.need_bytes, threads_need(p.thread_calls));
  p.arena_bytes = static_cast<int64_t>(std::max({verify_arena(p.sweep_growth), bench_arena(),
                                                 static_cast<double>(p.thread_calls)}) *
                                       static_cast<double>(io)) + n.guard_bytes + (int64_t(1) << 30);
  if (p.need_bytes > p.limit_bytes)
    p.refused = "the call moves " + gigabytes(io) + " (inputs and outputs); verifying it needs at least " +
                gigabytes(need_at(1.0)) + " and " + gigabytes(limit_at(1.0)) +
                (n.free_bytes > 0 ? " can be held (" + gigabytes(n.free_bytes) + " free on the device)"
                                  : " can be held");
  return p;
}

}  // namespace forge::worker
