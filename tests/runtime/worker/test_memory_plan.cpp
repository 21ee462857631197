// What an evaluation may hold (runtime/worker/memory_plan.h): the full
// protocol for ordinary calls, fewer copies and no float64 reference for huge
// ones, a refusal with the sizes when even that does not fit, and the size
// sweep held to what is left.
#include <doctest/doctest.h>

#include <algorithm>

#include "runtime/worker/case_plan.h"
#include "runtime/worker/memory_plan.h"

namespace forge::worker {

TEST_SUITE_BEGIN("runtime::MemoryPlan");

namespace {
constexpr int64_t GB = 1000 * 1000 * 1000;

MemoryNeeds fp32_call(int64_t in, int64_t out, int64_t free) {
  return MemoryNeeds{in, out, 2 * (in + out), free};
}
MemoryNeeds bf16_call(int64_t in, int64_t out, int64_t free) {
  return MemoryNeeds{in, out, 4 * (in + out), free};
}
}  // namespace

TEST_CASE("an ordinary call gets the full protocol within the stated multiple") {
  MemoryPlan p = plan_memory(fp32_call(256 << 10, 256 << 10, 140 * GB));
  CHECK(p.refused.empty());
  CHECK(p.bench_copies == 3);
  CHECK(p.float64_large);
  CHECK(p.moved_large);
  CHECK(p.sweep_growth == doctest::Approx(4.0));
  CHECK(p.limit_bytes == 4 * kFloor + kSlack);  // 8 x 512 KB is under the floor, per sweep step
  CHECK(p.thread_calls == kMaxThreadCalls);
  CHECK(p.need_bytes <= p.limit_bytes);
  CHECK(p.notes.empty());
  // Above the floor the multiple binds.
  MemoryPlan big = plan_memory(fp32_call(64 * (1 << 20), 64 * (1 << 20), 140 * GB));
  CHECK(big.limit_bytes == 4 * kMultiple * big.io_bytes + kSlack);
  CHECK(big.need_bytes <= big.limit_bytes);
}

TEST_CASE("a small bf16 call keeps its float64 reference and the 4x sweep") {
  // cumsum over [64, 1000] bf16: the float64 reference alone is 4x the call's
  // bytes, more than the multiple leaves beside the protocol; the floor holds it.
  MemoryPlan p = plan_memory(bf16_call(128000, 128000, 80 * GB));
  CHECK(p.refused.empty());
  CHECK(p.float64_large);
  CHECK(p.moved_large);
  CHECK(p.bench_copies == 3);
  CHECK(p.sweep_growth == doctest::Approx(4.0));
  CHECK(p.notes.empty());
  // Mid-size bf16 calls (a [4096, 4096] layer norm: 64 MiB in and out; 100 MB)
  // keep float64 and still sweep to 4x: the floor grows with the sweep.
  for (int64_t half : {int64_t(32) << 20, int64_t(50) * 1000 * 1000}) {
    MemoryPlan mid = plan_memory(bf16_call(half, half, 80 * GB));
    CHECK(mid.float64_large);
    CHECK(mid.sweep_growth == doctest::Approx(4.0));
    CHECK(mid.need_bytes <= mid.limit_bytes);
  }
  // A bf16 call of gigabytes still gives the float64 reference up.
  MemoryPlan big = plan_memory(bf16_call(4 * GB, 4 * GB, 80 * GB));
  CHECK(big.refused.empty());
  CHECK_FALSE(big.float64_large);
}

TEST_CASE("KernelBench's softmax (4096 x 393216 fp32) on an H200 fits, its sweep held at the captured size") {
  const int64_t bytes = int64_t(4096) * 393216 * 4;
  MemoryPlan p = plan_memory(fp32_call(bytes, bytes, 140 * GB));
  CHECK(p.refused.empty());
  CHECK(p.need_bytes <= p.limit_bytes);
  CHECK(p.limit_bytes <= static_cast<int64_t>(kFreeShare * 140 * GB));
  CHECK(p.sweep_growth > 1.0);
  CHECK(p.sweep_growth < 2.0);
}

TEST_CASE("KernelBench's relu (6.4 GB in, 6.4 GB out) on an 80 GB H100: the arena and the judge fit together") {
  const int64_t bytes = int64_t(4096) * 393216 * 4;
  MemoryNeeds n = fp32_call(bytes, bytes, 84 * GB);
  n.guard_bytes = 4 * 4 * (int64_t(256) << 20);
  MemoryPlan p = plan_memory(n);
  REQUIRE(p.refused.empty());
  CHECK_FALSE(p.moved_large);
  CHECK_FALSE(p.float64_large);
  CHECK(p.bench_copies == 1);
  CHECK(p.sweep_growth >= 1.0);
  CHECK(p.need_bytes <= p.limit_bytes);
  CHECK(p.limit_bytes <= static_cast<int64_t>(kFreeShare * 84 * GB));
  // Without run 4 the arena holds one case (or the benchmark's two sets), not
  // two cases at the sweep's top; the judge's part (two case sizes) is left.
  const double io = static_cast<double>(p.io_bytes);
  CHECK(p.arena_bytes <= static_cast<int64_t>(std::max(p.sweep_growth, 2.0) * io) + n.guard_bytes + (int64_t(1) << 30));
  CHECK(p.arena_bytes + static_cast<int64_t>(2.0 * p.sweep_growth * io) <= p.need_bytes);
  // The concurrent-calls check calls fewer threads at once, within the limit.
  CHECK(p.thread_calls >= 2);
  CHECK(p.thread_calls < kMaxThreadCalls);
  CHECK(static_cast<int64_t>(p.thread_calls * io) <= p.arena_bytes);
}

TEST_CASE("a call too large for all copies gives them up, then the float64 reference, then is refused") {
  // 12 GB in, 12 GB out on a 24 GB machine: refused, the message naming the sizes.
  MemoryPlan big = plan_memory(fp32_call(12 * GB, 12 * GB, 20 * GB));
  CHECK(big.bench_copies == 1);
  CHECK_FALSE(big.float64_large);
  REQUIRE_FALSE(big.refused.empty());
  CHECK(big.refused.find("24.0 GB") != std::string::npos);
  CHECK(big.refused.find("20.0 GB free") != std::string::npos);
  // 1 GB in and out with 12 GB free: one copy, no float64 at the captured size, accepted.
  MemoryPlan mid = plan_memory(fp32_call(GB, GB, 12 * GB));
  CHECK(mid.refused.empty());
  CHECK(mid.bench_copies == 1);
  CHECK_FALSE(mid.float64_large);
  CHECK(mid.need_bytes <= mid.limit_bytes);
  CHECK(mid.notes.size() >= 2);
}

TEST_CASE("the size sweep stays within the plan's growth") {
  PlanArg x{"self", true, {4096, 1000}, 4};
  std::vector<std::string> notes;
  auto sizes = sweep_sizes(x, 0, {}, notes, 4.0);
  CHECK(sizes.back() == 4 * 4096);
  notes.clear();
  sizes = sweep_sizes(x, 0, {}, notes, 1.0);
  // 4096 x 1000 fp32 is 16 MB, below the 64 MiB every sweep may use: 4x stays.
  CHECK(sizes.back() == 4 * 4096);
  PlanArg huge{"self", true, {4096, 393216}, 4};
  notes.clear();
  sizes = sweep_sizes(huge, 0, {}, notes, 1.0);
  CHECK(sizes.back() < 4096);
  REQUIRE(notes.size() == 1);
  CHECK(notes[0].find("left out") != std::string::npos);
}

TEST_SUITE_END();

}  // namespace forge::worker
