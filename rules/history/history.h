// History: after search, each target's chain of improvements is committed to
// git (rules/history/repo.h, docs/HISTORY.md), one commit per improvement, by
// target rank then iteration. A kernel improves on the target's current best
// when its median time is below the best's by more than both spreads (the
// same rule the worker uses against stock, docs/WORKER.md), so measurement
// noise never enters history. Skipped in dry mode (status, explain).
#pragma once

#include <optional>
#include <vector>

#include "engine/build.h"
#include "rules/history/repo.h"

namespace forge {

class HistoryRule : public Rule {
 public:
  std::string name() const override { return "history"; }
  void apply(BuildContext& ctx) override;
};

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

// The history entries of every target's chain, read back from the store.
// Kernels whose records are missing are skipped with a note.
std::vector<HistoryEntry> history_entries(BuildContext& ctx);

}  // namespace forge
