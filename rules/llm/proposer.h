// The language model as MCTS actions, in the same tree as the strategy library.
//
// Action {kind: "llm", strategy: "", params: {"variant": k}} under node N means
// "ask the model for variant k of N's kernel" (N verified, or the stock root:
// then "write one"). LlmProposer offers variants 0..variants-1 under every such
// node; the action's note (journaled, not part of its identity) lists N's
// ancestors and N's other children with their outcomes, so the prompt says what
// was tried around here. MixedProposer interleaves proposers (strategies first),
// so forge.yaml can pick strategies only, the model only, or both.
//
// The variants under a node are asked together: when the search evaluates the
// first of them, the requests of the others (as many as the iteration budget
// can still use) go out at once, up to the client's `concurrency` in flight,
// with the history note of the first; their evaluations take the replies as
// they arrive. A request that fails for its own reasons (LlmError::transient:
// a timeout, a server failing after the retries, the command's failure) skips
// its action (mcts::Skipped: reported, not journaled, asked again next build);
// a configuration error (a refused key, an unknown model) stops the search.
//
// LlmEvaluator turns an "llm" action into a kernel: prompt (rules/llm/prompt.h)
// -> cached reply (rules/llm/cache.h) -> the fenced block defining forge_kernel
// (rules/llm/reply.h; none -> one repair turn) -> the usual evaluation; a
// rejected kernel (static check, compile error, verifier) gets one repair turn
// with the error verbatim, and the repaired kernel's outcome is the node's.
// Replies are cached, so a rebuild or replay never calls the model again.
#pragma once

#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/build.h"
#include "engine/mcts.h"
#include "rules/evaluate/executor.h"
#include "rules/evaluate/family.h"
#include "rules/llm/cache.h"
#include "rules/llm/prompt.h"

namespace forge {

class LlmProposer : public mcts::Proposer {
 public:
  explicit LlmProposer(int variants) : m_variants(variants) {}
  std::vector<mcts::Action> actions(const mcts::Tree& tree, mcts::NodeId parent,
                                    mcts::Rng& rng) override;

 private:
  int m_variants;
};

// Alternates between the proposers' lists (first of each, then second of
// each...), dropping repeats.
class MixedProposer : public mcts::Proposer {
 public:
  explicit MixedProposer(std::vector<mcts::Proposer*> parts) : m_parts(std::move(parts)) {}
  std::vector<mcts::Action> actions(const mcts::Tree& tree, mcts::NodeId parent,
                                    mcts::Rng& rng) override;

 private:
  std::vector<mcts::Proposer*> m_parts;
};

// "the stock kernel", "strategy rows_3pass {\"ISA\":0}", "model variant 2 of node 3".
std::string describe_action(const mcts::Action& a, mcts::NodeId parent);

class LlmEvaluator {
 public:
  struct Inputs {
    const Target* target = nullptr;
    const Family* family = nullptr;
    const LlmSpec* spec = nullptr;
    const llm::PromptTemplates* templates = nullptr;
    std::string example_source;  // a library kernel shown under the root ("" = none)
    std::optional<double> ceiling_bytes_per_s;
  };
  LlmEvaluator(BuildContext& ctx, Executor& executor, llm::CachedClient& client, Inputs in)
      : m_ctx(ctx), m_executor(executor), m_client(client), m_in(std::move(in)) {}
  // Waits for the requests still in flight (their replies are cached).
  ~LlmEvaluator();
  // Throws mcts::Skipped when the model's request failed (LlmError::transient).
  mcts::Outcome evaluate(const mcts::EvalRequest& request);
  // No variant is asked ahead past this many iterations (0: no cap).
  void ask_ahead_within(int iterations) { m_iterations = iterations; }

  // The first prompt of `request` (for tests and `forge explain`).
  llm::Request first_request(const mcts::EvalRequest& request);

 private:
  struct Asked {
    llm::Request request;
    std::shared_future<llm::Reply> reply;
  };
  // The first request of `request`'s variant, sent now with its siblings' or
  // earlier with them.
  Asked take_first(const mcts::EvalRequest& request);
  mcts::Outcome evaluate_asked(const mcts::EvalRequest& request);
  std::string ask(const llm::Request& r, std::vector<std::string>& keys);
  BuildContext& m_ctx;
  Executor& m_executor;
  llm::CachedClient& m_client;
  Inputs m_in;
  int m_iterations = 0;
  std::map<std::pair<mcts::NodeId, int>, Asked> m_asked;  // (parent, variant), not yet evaluated
};

}  // namespace forge
