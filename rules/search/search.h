// Search: per target, Monte Carlo Tree Search (engine/mcts.h) over candidates
// from the strategy library (rules/search/strategies.h) and/or a language model
// (rules/llm/proposer.h; forge.yaml `proposer:`), each evaluated through the
// evaluation pipeline (rules/evaluate/evaluate.h) as cached steps, the tree kept as a
// journal in the store (engine/journal.h). So an unchanged manifest replays the
// journal and evaluates nothing; a raised budget continues the tree.
//
// Evaluations run one at a time (budget.parallel is not used yet: the local
// executor owns a single worker).
#pragma once

#include <memory>
#include <optional>

#include "engine/build.h"
#include "engine/mcts.h"
#include "rules/evaluate/compile.h"
#include "rules/evaluate/executor.h"
#include "rules/evaluate/family.h"
#include "rules/llm/cache.h"
#include "rules/search/chain_strategies.h"
#include "rules/capture/runtime_build.h"

namespace forge {

class SearchRule : public Rule {
 public:
  SearchRule() = default;
  // Tests talk to a fake or loopback transport instead of libcurl's.
  explicit SearchRule(std::shared_ptr<llm::HttpTransport> transport)
      : m_transport(std::move(transport)) {}
  std::string name() const override { return "search"; }
  void apply(BuildContext& ctx) override;

 private:
  // 1 when `t` was searched, 0 when it has no family or nothing to propose. The worker is built and
  // the executor started on first need. A chain target's strategies come generated (chain_strategies.h).
  int search_target(BuildContext& ctx, Target& t, const std::vector<Family>& families,
                    const Budget& budget, std::optional<RuntimeLibs>& rt,
                    std::unique_ptr<Executor>& executor, ChainStrategies* generated = nullptr);
  // The model's client, made on first need (one per build: its semaphore is shared).
  llm::Client& model_client(BuildContext& ctx);

  std::shared_ptr<llm::HttpTransport> m_transport;
  std::unique_ptr<llm::Client> m_client;
  llm::Ledger m_ledger;  // every target's requests, for the build's "llm" report
  // Whether budget.build_seconds has run out.
  bool past_stop() const { return m_stop_at > 0 && mcts::steady_seconds() >= m_stop_at; }
  double m_stop_at = 0;  // mcts::steady_seconds() at budget.build_seconds, 0 = none
  std::string m_limit;   // "budget.build_seconds (N s)"
  int m_unreached = 0;   // targets reached after it: their journals replayed, nothing evaluated
};

}  // namespace forge
