// Monte Carlo Tree Search over candidate kernels of one target.
//
// Nodes are candidates; the root is the stock kernel (speedup 1 by definition).
// One iteration = select a node, ask the Proposer for an action under it, add
// the child (pending, with virtual loss), evaluate it (propose -> compile ->
// verify -> bench, outside this file), then back the reward up to the root.
//
// Data and behaviour are apart (ninja's State vs Plan): `Tree` is plain data
// with one owner; `Search` selects, expands and backpropagates on a Tree it
// borrows; `run_search` drives iterations, in parallel, through a Journal.
//
// Reward (scale-free: a 5 µs and a 5 ms target behave the same, because only
// the ratio to stock ever reaches the search, never milliseconds):
//   verified (Ok, NotFaster)   clamp(ln(speedup), kRewardMin = -1, kRewardMax = +3)
//   StaticReject            -1.0   (caught before compiling; as bad as not compiling)
//   CompileError            -1.0
//   WrongResult             -1.5   (compiled, ran, wrong: the branch misleads)
//   Crash, Timeout          -2.0   (also cost a worker restart or a whole timeout)
//   in flight (virtual)     -1.0   per pending evaluation below a node
// So stock = 0, a 2x kernel = +0.69, and every failure is below every verified
// kernel faster than 0.37x.
//
// UCT, for a child c of p (only completed children are scored):
//   n_c = visits(c) + virtual_loss(c)
//   q_c = (value_sum(c) + virtual_loss(c) * kVirtualLossReward) / n_c
//   score = q_c + exploration * sqrt(ln(max(1, visits(p) + virtual_loss(p))) / n_c)
// exploration defaults to 0.7: the spread of rewards between a good and a
// middling kernel is ~0.3-0.7 (1.4x-2x), so one unit of exploration is worth
// about a 2x kernel. Ties go to the lower node id.
//
// Progressive widening: a node may have at most
//   ceil(widening_k * max(1, visits + virtual_loss) ^ widening_alpha)
// children (defaults k = 2, alpha = 0.5: 2 children at 1 visit, 4 at 4, 10 at
// 25); while it has fewer, selection expands it, otherwise selection descends.
// The bound is exceeded only when every existing child's subtree is exhausted
// (the proposer offers nothing under any of them), so a search never stalls.
//
// Visits: complete() adds exactly one visit and one reward to the new node and
// each ancestor, so visits(root) == completed iterations and, for every other
// node, visits == 1 + sum of its children's visits. Completing a node twice
// throws (the seed's bug was counting visits twice).
//
// Determinism: the only randomness is the Rng handed to the Proposer, seeded
// from (seed, parent id) with std::mt19937_64 -- the same stream every time the
// same parent is asked. Given the same seed, the same proposer and the same
// outcomes, the tree is identical, bit for bit.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "engine/manifest.h"  // Budget

namespace forge::mcts {

using NodeId = int;  // index into Tree::nodes(); ids follow creation order
inline constexpr NodeId kRoot = 0;
inline constexpr NodeId kNoNode = -1;
using Rng = std::mt19937_64;

// What to try under a node. What an action becomes (a kernel source) is decided
// outside the search, by the Evaluator.
struct Action {
  std::string kind;      // "strategy" | "llm" ("stock" for the root only)
  std::string strategy;  // strategy name (for "llm": the strategy the variant starts from, or "")
  nlohmann::json params = nlohmann::json::object();
  std::string parent_note;  // free text for the proposer/LLM; not part of the identity
};

// Identity of an action among its siblings: canonical JSON of kind, strategy and
// params (parent_note excluded). Two actions with the same key are the same try.
std::string action_key(const Action& action);
nlohmann::json action_json(const Action& action);
// nullopt (and *why) unless `j` is what action_json writes.
std::optional<Action> action_from_json(const nlohmann::json& j, std::string* why);

struct Outcome {
  // On disk these are the strings of status_name(); never change one without
  // bumping the journal version (engine/journal.h).
  enum class Status { Ok, CompileError, StaticReject, WrongResult, Crash, Timeout, NotFaster };
  Status status = Status::Crash;
  double speedup = 0;  // over stock, finite and > 0; meaningful only when verified()
  std::string reason;  // one line for people ("max abs error 3e-2 at [4, 17]"); may be ""
  // Step keys or digests of what produced this outcome, by step name (e.g.
  // {"propose": key, "compile": key, "evaluate": key, "source": digest}); string values.
  nlohmann::json steps = nlohmann::json::object();

  // Ok and NotFaster passed verification and carry a speedup.
  bool verified() const { return status == Status::Ok || status == Status::NotFaster; }
};

const char* status_name(Outcome::Status status);  // "ok", "compile_error", ...
std::optional<Outcome::Status> parse_status(std::string_view name);

inline constexpr double kRewardMin = -1.0;
inline constexpr double kRewardMax = 3.0;
inline constexpr double kPenaltyStaticReject = -1.0;
inline constexpr double kPenaltyCompileError = -1.0;
inline constexpr double kPenaltyWrongResult = -1.5;
inline constexpr double kPenaltyCrash = -2.0;
inline constexpr double kPenaltyTimeout = -2.0;
inline constexpr double kVirtualLossReward = -1.0;

// The scale-free reward above. A verified outcome must have a finite speedup > 0
// (std::invalid_argument otherwise).
double reward(const Outcome& outcome);

struct SearchParams {
  uint64_t seed = 0;
  double exploration = 0.7;
  double widening_k = 2.0;
  double widening_alpha = 0.5;
  // What the journal records to refuse replaying under other settings.
  nlohmann::json to_json() const;
};

struct Node {
  NodeId id = kRoot;
  NodeId parent = kNoNode;  // kNoNode for the root
  int depth = 0;
  int iteration = -1;            // the iteration that created it (id - 1); -1 for the root
  Action action;                 // kind "stock" for the root
  std::string key;               // action_key(action)
  std::vector<NodeId> children;  // in creation order
  bool pending = false;          // begun, not completed
  int visits = 0;
  double value_sum = 0;
  int virtual_loss = 0;  // evaluations in flight at or below this node
  Outcome outcome;       // meaningful when !pending; the root is Ok with speedup 1
};

// The search tree of one target: plain data, one owner. Only Search mutates it.
class Tree {
 public:
  Tree();  // the root alone

  const std::vector<Node>& nodes() const { return m_nodes; }
  const Node& node(NodeId id) const { return m_nodes.at(static_cast<size_t>(id)); }
  int size() const { return static_cast<int>(m_nodes.size()); }
  int pending() const { return m_pending; }
  int completed() const { return size() - 1 - m_pending; }  // iterations backed up

  // Highest verified speedup, the root (stock, 1.0) included; ties: the lowest id.
  NodeId best() const;

  // Everything, deterministic (for tests, `forge serve` and reports):
  // {"nodes": [{"id", "parent", "depth", "iteration", "action", "pending", "visits",
  //             "value", "virtual_loss", "status", "speedup", "reason", "steps"}]}
  nlohmann::json to_json() const;

  void clear();  // back to the root alone

 private:
  friend class Search;
  std::vector<Node> m_nodes;
  int m_pending = 0;
};

class Proposer {
 public:
  virtual ~Proposer() = default;
  // Candidate actions for expanding `parent`, best first. The search takes the
  // first whose action_key no child of `parent` has yet; an empty list (or all
  // tried) means `parent` is closed. Called on the search's thread only; `rng` is
  // seeded from (seed, parent). Must be deterministic given tree and rng, and
  // cheap: select() may ask several nodes per iteration. An "llm" action only
  // names the request; the model is called by the Evaluator, as a cached step.
  virtual std::vector<Action> actions(const Tree& tree, NodeId parent, Rng& rng) = 0;
};

struct Expansion {
  NodeId parent = kRoot;
  Action action;
};

class Search {
 public:
  Search(Tree& tree, Proposer& proposer, SearchParams params = {});

  // The next expansion by UCT descent with progressive widening, or nullopt
  // when nothing can be expanded now: every subtree is exhausted or blocked by
  // pending evaluations (then completing one may open new choices).
  std::optional<Expansion> select();

  // The first action of the proposer not yet tried under `parent`.
  std::optional<Action> propose(NodeId parent);

  // Adds the pending child and puts one virtual loss on it and each ancestor.
  // Throws std::invalid_argument when the parent is unknown or pending, or the
  // action was already tried under it.
  NodeId begin_expansion(const Expansion& expansion);

  // Backs the outcome up: one visit and reward(outcome) on the node and each
  // ancestor, and their virtual loss removed. Throws std::invalid_argument for a
  // node that is not pending (never count a visit twice) or a verified outcome
  // without a finite speedup > 0.
  void complete(NodeId node, const Outcome& outcome);

  // Drops a pending node that is the newest node (an evaluation that will never
  // complete, e.g. after an interruption); its virtual loss is removed.
  void abandon(NodeId node);
  // propose() no longer offers the action with this key under `parent` (an
  // evaluation the evaluator skipped: see Skipped). For this Search only.
  void skip(NodeId parent, const std::string& key);

  size_t widening_limit(NodeId node) const;
  double uct(NodeId child) const;  // the score above, for a completed non-root node

  Tree& tree() { return m_tree; }
  const Tree& tree() const { return m_tree; }
  const SearchParams& params() const { return m_params; }

 private:
  Tree& m_tree;
  Proposer& m_proposer;
  SearchParams m_params;
  std::set<std::pair<NodeId, std::string>> m_skipped;  // (parent, action key)
};

// ---- the driver -------------------------------------------------------------

struct EvalRequest {
  int iteration = 0;
  NodeId node = kRoot;  // the pending node being evaluated
  NodeId parent = kRoot;
  int depth = 0;
  Action action;
  // The parent's Outcome::steps ({} for the root): how an evaluator finds the
  // parent's source to derive a variant from.
  nlohmann::json parent_steps = nlohmann::json::object();
};

// Thrown by an Evaluator that cannot judge an action for a reason outside the
// candidate (a model request that failed after its retries or timed out):
// run_search drops the node, journals nothing for it (the next run tries the
// action again), lists it in SearchResult::skipped, and goes on with the other
// actions; this run does not propose it again.
struct Skipped : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Evaluator {
 public:
  virtual ~Evaluator() = default;
  // Turns the action into a candidate and judges it. Every candidate failure is
  // an Outcome status; an exception means the build is interrupted (the search
  // stops; see run_search). With budget.parallel > 1 it is called from several
  // threads at once and must be thread-safe; it never sees the Tree.
  virtual Outcome evaluate(const EvalRequest& request) = 0;
};

class Journal;  // engine/journal.h

struct RunOptions {
  // Monotonic seconds; default steady_seconds(). Tests inject a fake.
  std::function<double()> clock;
  // A clock() reading after which no new iteration starts (the build's
  // budget.build_seconds; SearchResult::time_up), 0 = none.
  double stop_at = 0;
};

// std::chrono::steady_clock's time in seconds: run_search's default clock.
double steady_seconds();

struct SearchResult {
  int iterations = 0;      // completed iterations in the tree (replayed + new)
  int replayed = 0;        // taken from the journal without evaluating
  int evaluated = 0;       // new evaluations this run
  // Actions skipped this run (Skipped): "node N (parent P): <what the evaluator said>".
  std::vector<std::string> skipped;
  bool exhausted = false;  // the proposer had nothing left to try
  bool time_up = false;    // budget.seconds ran out
  double seconds = 0;      // search time spent on this target over all runs
  NodeId best = kRoot;
  double best_speedup = 1.0;
};

// Runs the search of one target to its budget:
//  1. clears the tree and replays the journal into it (no proposer, no
//     evaluator calls); a journal that cannot be replayed is reset (warning);
//  2. runs new iterations until budget.iterations iterations exist in total
//     (0 = no iteration cap) or budget.seconds of search time were spent over
//     all runs (0 = no time cap), or nothing is left to try; with neither cap,
//     nothing runs; a budget below the journal's length replays it all;
//  3. appends one journal record per completed iteration, in iteration order.
//
// Parallelism (P = max(1, budget.parallel); the caller resolves the manifest's
// 0 = "one per core" before calling) is windowed, so that the tree does
// not depend on timing: before selecting iteration i, every iteration <= i - P
// is completed, in iteration order, and i-P+1..i-1 are in flight with virtual
// loss. Completions are committed in iteration order too (a fast evaluation
// waits for slower older ones). Replay uses the same window, so a run of M
// iterations equals a run of N followed by a run of M (same P); with another P
// the continued tree is still valid, only explored in another order.
//
// If the evaluator throws Skipped, that node and the newer ones in flight are
// dropped (after their evaluations finish) and the search goes on without that
// action; iteration numbers stay dense, so the journal replays as usual. The
// skipped action spends one iteration of this run's budget, so the journal ends
// one short and the next run (same budget) tries it again.
// If the evaluator throws anything else, the exception propagates after every other evaluation
// in flight has finished; the journal then holds every iteration before the
// failed one, the tree only its completed iterations. Evaluations that finished
// after the failed one are not journaled and are redone on resume (cheaply: their
// steps are in the action cache).
//
// The journal must have been opened with search.params().to_json()
// (std::invalid_argument otherwise).
SearchResult run_search(Search& search, Evaluator& evaluator, const Budget& budget,
                        Journal& journal, const RunOptions& options = {});

}  // namespace forge::mcts
