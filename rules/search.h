// Search: per target, Monte Carlo Tree Search (engine/mcts.h) over candidates
// from the strategy library (rules/strategies.h), each evaluated through the
// evaluation pipeline (rules/evaluate.h) as cached steps, the tree kept as a
// journal in the store (engine/journal.h). So an unchanged manifest replays the
// journal and evaluates nothing; a raised budget continues the tree.
//
// Evaluations run one at a time (budget.parallel is not used yet: the local
// executor owns a single worker).
#pragma once

#include <memory>
#include <optional>

#include "engine/build.h"
#include "rules/executor.h"
#include "rules/family.h"
#include "rules/runtime_build.h"

namespace forge {

class SearchRule : public Rule {
 public:
  std::string name() const override { return "search"; }
  void apply(BuildContext& ctx) override;

 private:
  // 1 when `t` was searched, 0 when no strategy applies. The worker is built and
  // the executor started on first need.
  int search_target(BuildContext& ctx, Target& t, const std::vector<Family>& families,
                    const Budget& budget, std::optional<RuntimeLibs>& rt,
                    std::unique_ptr<Executor>& executor);
};

}  // namespace forge
