// How much memory one evaluation may hold, and what it gives up to stay within
// it (docs/WORKER.md, "Memory"). Torch-free: forge's unit tests check it.
//
// An evaluation holds at most kMultiple times the bytes (inputs plus outputs)
// of the largest call it verifies, or kFloor per captured call's worth of
// them if that is more, plus its guards and kSlack, and never more
// than kFreeShare of the memory free on its device when it starts. The
// largest call is the size sweep's top, 4x the captured call where memory
// allows (the package accepts calls up to what was verified).
//
// What the protocol holds, in multiples of a case's bytes (verify.cpp,
// benchmark.cpp): in the exchange arena, the case itself and, for run 4, its
// copy at other addresses; in the judge's memory, the stock reference with
// its inputs' clone, then the snapshots (at most 2: outputs twice plus
// inputs once), plus the float64 reference's share. The benchmark holds
// 1 + its rotating copies in the arena and 2 in the judge; the concurrent-calls
// check (verify_threads.cpp) one case per call thread in each. When the captured
// call does not fit, the evaluation gives up, in order: the rotating copies
// (one is left), then the float64 reference and run 4 for cases of at least
// half the captured call's bytes; the sweep stops below 4x where free memory
// ends; the concurrent-calls check calls fewer threads at once (it is skipped,
// with a note, where two copies do not fit); and when even the captured
// call's verification does not fit, it is refused. The CUDA arena is sized from the same model (arena_bytes).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace forge::worker {

constexpr int64_t kMultiple = 8;
// Below kFloor / kMultiple bytes a call gets kFloor per sweep step: a 16-bit
// call's float64 reference alone is 4x its bytes, so 8x would take it (and
// the 4x sweep) from every small bf16/fp16 call, where it costs next to
// nothing. Scaled with the sweep's growth, as the protocol's need is, so the
// floor never stops a sweep that the float64 reference's loss would not.
constexpr int64_t kFloor = int64_t(1) << 30;
constexpr int64_t kSlack = int64_t(2) << 30;  // guards, the judge's small tensors, the allocator's rounding
constexpr double kFreeShare = 0.9;
constexpr int kMaxThreadCalls = 4;  // the runner's call threads (runner_protocol.h, kMaxSlots)

struct MemoryNeeds {
  int64_t input_bytes = 0;   // the captured call's tensor inputs
  int64_t output_bytes = 0;  // its outputs, as the stock kernel returns them
  int64_t float64_bytes = 0; // its inputs and outputs in float64 (the accuracy reference)
  int64_t free_bytes = 0;    // free on the device (host: MemAvailable); 0: unknown
  int64_t guard_bytes = 0;   // the guards around the arena's buffers at their largest
};

struct MemoryPlan {
  int64_t io_bytes = 0;       // inputs + outputs
  int64_t limit_bytes = 0;    // what the evaluation may hold
  int64_t need_bytes = 0;     // what the chosen protocol holds at its peak (the model above)
  int64_t arena_bytes = 0;    // its candidate-visible part: the exchange arena's capacity
  int bench_copies = 3;       // rotating copies of the timed call's buffers
  bool float64_large = true;  // float64 reference for cases of at least half the captured call's bytes
  bool moved_large = true;    // run 4 (other addresses) for cases of at least half the captured call's bytes
  double sweep_growth = 4;    // the size sweep's largest case, in multiples of the captured call's bytes
  int thread_calls = kMaxThreadCalls;  // the concurrent-calls check's calls at once at most; 0: skipped
  std::string refused;        // non-empty: the evaluation cannot run here, and why
  std::vector<std::string> notes;
};

MemoryPlan plan_memory(const MemoryNeeds& needs);

// Whether a case of `case_bytes` is "large" for the plan: the float64
// reference and run 4 are given up for it where the plan says so.
inline bool large_case(int64_t case_bytes, const MemoryPlan& plan) { return 2 * case_bytes >= plan.io_bytes; }

// Gigabytes, for messages ("12.9 GB").
std::string gigabytes(int64_t bytes);

}  // namespace forge::worker
