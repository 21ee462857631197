// Search: per target, Monte Carlo Tree Search (engine/mcts.h) over candidates
// from the strategy library (rules/strategies.h), each evaluated through the
// evaluation pipeline (rules/evaluate.h) as cached steps, the tree kept as a
// journal in the store (engine/journal.h). So an unchanged manifest replays the
// journal and evaluates nothing; a raised budget continues the tree.
//
// Evaluations run one at a time (budget.parallel is not used yet: the local
// executor owns a single worker).
#pragma once

#include "engine/build.h"

namespace forge {

class SearchRule : public Rule {
 public:
  std::string name() const override { return "search"; }
  void apply(BuildContext& ctx) override;
};

}  // namespace forge
