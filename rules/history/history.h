// History: after search, each target's chain of improvements is committed to
// git (rules/history/repo.h, docs/HISTORY.md), one commit per improvement, by
// target rank then iteration: the kernels of its improvement chain
// (rules/improvement.h), so measurement noise never enters history. Skipped in
// dry mode (status, explain).
#pragma once

#include <vector>

#include "engine/build.h"
#include "rules/history/repo.h"

namespace forge {

class HistoryRule : public Rule {
 public:
  std::string name() const override { return "history"; }
  void apply(BuildContext& ctx) override;
};

// The history entries of every target's chain, read back from the store.
// Kernels whose records are missing are skipped with a note.
std::vector<HistoryEntry> history_entries(BuildContext& ctx);

}  // namespace forge
