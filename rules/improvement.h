// The improvement rule, in one place: a kernel improves on the tip of its
// target's chain when its median time is below the tip's by more than both
// spreads (the same rule the worker uses against stock, docs/WORKER.md), so
// measurement noise never changes what ships. Stage-neutral: search (the
// target's figures), history (the commits), package (what ships) and serve/
// (the GUI's progress plot) include this header, not each other.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "engine/target.h"
#include "store/store.h"

namespace forge {

struct BenchTime {
  double median = 0, spread = 0;  // microseconds; spread = interquartile range
};

// A kernel's time from its evaluation record (bench.candidate_us).
BenchTime candidate_time(const nlohmann::json& evaluation);

// Indices into `times` (kernels in iteration order, each already faster than
// stock) of the improvement chain: the first, then each that beats the last kept.
std::vector<size_t> improvement_chain(const std::vector<BenchTime>& times);

// The kernel a target ships, reports and is compared with Inductor by: the
// tip of its improvement chain, the last commit of its history. Reads each
// kernel's evaluation record into `records` (in t.kernels' order); nullopt
// when the target has no kernel or a record is missing from the store.
std::optional<size_t> shipped_kernel_index(store::Store& store, const Target& t, std::vector<nlohmann::json>* records);

}  // namespace forge
