#include "engine/mcts.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <future>
#include <stdexcept>

#include "engine/journal.h"

namespace forge::mcts {

using nlohmann::json;

// ---- actions and outcomes ---------------------------------------------------

std::string action_key(const Action& action) {
  // json objects keep sorted keys: the dump is canonical.
  return json{{"kind", action.kind}, {"strategy", action.strategy}, {"params", action.params}}.dump(
      -1, ' ', false, json::error_handler_t::replace);
}

json action_json(const Action& action) {
  return json{{"kind", action.kind},
              {"strategy", action.strategy},
              {"params", action.params},
              {"note", action.parent_note}};
}

std::optional<Action> action_from_json(const json& j, std::string* why) {
  if (!j.is_object()) {
    *why = "action is not an object";
    return std::nullopt;
  }
  auto kind = j.find("kind");
  auto strategy = j.find("strategy");
  auto params = j.find("params");
  auto note = j.find("note");
  if (kind == j.end() || !kind->is_string() || kind->get_ref<const std::string&>().empty()) {
    *why = "action has no kind";
    return std::nullopt;
  }
  if (strategy == j.end() || !strategy->is_string() || params == j.end() || note == j.end() ||
      !note->is_string()) {
    *why = "action lacks strategy, params or note";
    return std::nullopt;
  }
  return Action{kind->get<std::string>(), strategy->get<std::string>(), *params,
                note->get<std::string>()};
}

namespace {
// Index = the enum's value. On-disk names: never change one without bumping
// kJournalVersion (and reading the old name, below).
constexpr const char* kStatusNames[] = {"ok",    "compile_error", "static_reject", "wrong_result",
                                        "crash", "timeout",       "not_faster"};
}  // namespace

const char* status_name(Outcome::Status status) {
  return kStatusNames[static_cast<int>(status)];
}

std::optional<Outcome::Status> parse_status(std::string_view name) {
  for (int i = 0; i < static_cast<int>(std::size(kStatusNames)); ++i)
    if (name == kStatusNames[i]) return static_cast<Outcome::Status>(i);
  if (name == "slower") return Outcome::Status::NotFaster;  // journal version 1's name
  return std::nullopt;
}

double reward(const Outcome& outcome) {
  using S = Outcome::Status;
  switch (outcome.status) {
    case S::Ok:
    case S::NotFaster:
      if (!std::isfinite(outcome.speedup) || outcome.speedup <= 0)
        throw std::invalid_argument("a verified outcome needs a finite speedup > 0");
      return std::clamp(std::log(outcome.speedup), kRewardMin, kRewardMax);
    case S::StaticReject:
      return kPenaltyStaticReject;
    case S::CompileError:
      return kPenaltyCompileError;
    case S::WrongResult:
      return kPenaltyWrongResult;
    case S::Crash:
      return kPenaltyCrash;
    case S::Timeout:
      return kPenaltyTimeout;
  }
  throw std::invalid_argument("unknown outcome status");
}

json SearchParams::to_json() const {
  return json{{"seed", seed},
              {"exploration", exploration},
              {"widening_k", widening_k},
              {"widening_alpha", widening_alpha}};
}

// ---- the tree ---------------------------------------------------------------

Tree::Tree() {
  clear();
}

void Tree::clear() {
  Node root;
  root.action.kind = "stock";
  root.key = action_key(root.action);
  root.outcome.status = Outcome::Status::Ok;
  root.outcome.speedup = 1.0;
  m_nodes.assign(1, root);
  m_pending = 0;
}

NodeId Tree::best() const {
  NodeId best = kRoot;
  for (const Node& n : m_nodes) {
    if (n.pending || !n.outcome.verified()) continue;
    if (n.outcome.speedup > m_nodes[best].outcome.speedup) best = n.id;
  }
  return best;
}

json Tree::to_json() const {
  json nodes = json::array();
  for (const Node& n : m_nodes) {
    json j{{"id", n.id},
           {"parent", n.parent},
           {"depth", n.depth},
           {"iteration", n.iteration},
           {"action", action_json(n.action)},
           {"pending", n.pending},
           {"visits", n.visits},
           {"value", n.value_sum},
           {"virtual_loss", n.virtual_loss}};
    if (!n.pending) {
      j["status"] = status_name(n.outcome.status);
      j["speedup"] = n.outcome.verified() ? json(n.outcome.speedup) : json();
      j["reason"] = n.outcome.reason;
      j["steps"] = n.outcome.steps;
    }
    nodes.push_back(std::move(j));
  }
  return json{{"nodes", std::move(nodes)}};
}

// ---- the search -------------------------------------------------------------

namespace {
// SplitMix64 finalizer: spreads (seed, node) over the whole 64-bit seed space.
uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
}  // namespace

Search::Search(Tree& tree, Proposer& proposer, SearchParams params)
    : m_tree(tree), m_proposer(proposer), m_params(params) {}

size_t Search::widening_limit(NodeId id) const {
  const Node& n = m_tree.node(id);
  const double visits = std::max(1, n.visits + n.virtual_loss);
  return static_cast<size_t>(
      std::ceil(m_params.widening_k * std::pow(visits, m_params.widening_alpha)));
}

double Search::uct(NodeId child) const {
  const Node& c = m_tree.node(child);
  const Node& p = m_tree.node(c.parent);
  const double n = c.visits + c.virtual_loss;
  const double q = (c.value_sum + c.virtual_loss * kVirtualLossReward) / n;
  const double parent_visits = std::max(1, p.visits + p.virtual_loss);
  return q + m_params.exploration * std::sqrt(std::log(parent_visits) / n);
}

std::optional<Action> Search::propose(NodeId parent) {
  const Node& p = m_tree.node(parent);
  Rng rng(mix64(m_params.seed ^ mix64(static_cast<uint64_t>(parent))));
  std::vector<Action> actions = m_proposer.actions(m_tree, parent, rng);
  for (Action& a : actions) {
    const std::string key = action_key(a);
    const bool tried = m_skipped.count({parent, key}) ||
                       std::any_of(p.children.begin(), p.children.end(),
                                   [&](NodeId c) { return m_tree.node(c).key == key; });
    if (!tried) return std::move(a);
  }
  return std::nullopt;
}

std::optional<Expansion> Search::select() {
  const std::vector<Node>& nodes = m_tree.m_nodes;
  // Per call: `closed` = the proposer has nothing new under the node; `dead` =
  // nothing can be expanded in its subtree now (exhausted or blocked by pending).
  std::vector<char> closed(nodes.size(), 0), dead(nodes.size(), 0);
  while (!dead[kRoot]) {
    NodeId v = kRoot;
    while (true) {
      const Node& n = nodes[v];
      if (!closed[v] && n.children.size() < widening_limit(v)) {
        if (auto a = propose(v)) return Expansion{v, std::move(*a)};
        closed[v] = 1;
      }
      NodeId best = kNoNode;
      double best_score = 0;
      bool any_pending = false;
      for (NodeId c : n.children) {
        if (nodes[c].pending) {
          any_pending = true;
          continue;
        }
        if (dead[c]) continue;
        const double score = uct(c);
        if (best == kNoNode || score > best_score) {
          best = c;
          best_score = score;
        }
      }
      if (best != kNoNode) {
        v = best;
        continue;
      }
      // Every child is exhausted (none pending): widen past the limit rather
      // than stall; with a pending child, wait for it instead.
      if (!closed[v] && !any_pending) {
        if (auto a = propose(v)) return Expansion{v, std::move(*a)};
        closed[v] = 1;
      }
      dead[v] = 1;
      break;  // descend again from the root, around the dead subtree
    }
  }
  return std::nullopt;
}

NodeId Search::begin_expansion(const Expansion& e) {
  std::vector<Node>& nodes = m_tree.m_nodes;
  if (e.parent < 0 || e.parent >= m_tree.size())
    throw std::invalid_argument("expansion under unknown node " + std::to_string(e.parent));
  if (nodes[e.parent].pending)
    throw std::invalid_argument("expansion under pending node " + std::to_string(e.parent));
  Node n;
  n.key = action_key(e.action);
  for (NodeId c : nodes[e.parent].children)
    if (nodes[c].key == n.key)
      throw std::invalid_argument("action " + n.key + " already tried under node " +
                                  std::to_string(e.parent));
  n.id = m_tree.size();
  n.parent = e.parent;
  n.depth = nodes[e.parent].depth + 1;
  n.iteration = n.id - 1;
  n.action = e.action;
  n.pending = true;
  nodes.push_back(std::move(n));
  const NodeId id = m_tree.size() - 1;
  nodes[e.parent].children.push_back(id);
  for (NodeId v = id; v != kNoNode; v = nodes[v].parent) ++nodes[v].virtual_loss;
  ++m_tree.m_pending;
  return id;
}

void Search::complete(NodeId id, const Outcome& outcome) {
  std::vector<Node>& nodes = m_tree.m_nodes;
  if (id <= kRoot || id >= m_tree.size() || !nodes[id].pending)
    throw std::invalid_argument("complete() of node " + std::to_string(id) +
                                ", which is not pending");
  const double r = reward(outcome);  // validates the speedup first
  nodes[id].pending = false;
  nodes[id].outcome = outcome;
  if (!outcome.verified()) nodes[id].outcome.speedup = 0;
  for (NodeId v = id; v != kNoNode; v = nodes[v].parent) {
    ++nodes[v].visits;
    nodes[v].value_sum += r;
    --nodes[v].virtual_loss;
  }
  --m_tree.m_pending;
}

void Search::abandon(NodeId id) {
  std::vector<Node>& nodes = m_tree.m_nodes;
  if (id != m_tree.size() - 1 || id == kRoot || !nodes[id].pending)
    throw std::invalid_argument("abandon() of node " + std::to_string(id) +
                                ", which is not the newest pending node");
  for (NodeId v = id; v != kNoNode; v = nodes[v].parent) --nodes[v].virtual_loss;
  nodes[nodes[id].parent].children.pop_back();  // the newest child of its parent
  nodes.pop_back();
  --m_tree.m_pending;
}

void Search::skip(NodeId parent, const std::string& key) { m_skipped.insert({parent, key}); }

// ---- the driver -------------------------------------------------------------

double steady_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

namespace {

std::launch policy_for(size_t window) {
  // One at a time: evaluate on this thread when the result is asked for.
  return window > 1 ? std::launch::async : std::launch::deferred;
}

struct InFlight {
  JournalRecord record;  // outcome filled when `known` (replayed)
  bool known = false;
  std::future<Outcome> future;  // when !known
};

}  // namespace

SearchResult run_search(Search& search, Evaluator& evaluator, const Budget& budget,
                        Journal& journal, const RunOptions& options) {
  if (journal.search_params() != search.params().to_json())
    throw std::invalid_argument("run_search: journal '" + journal.ref() +
                                "' was opened with other search settings");
  const std::function<double()> clock = options.clock ? options.clock : steady_seconds;
  const double start = clock();
  const double seconds_before = journal.seconds();
  const size_t window = static_cast<size_t>(std::max(1, budget.parallel));
  const auto seconds_now = [&] { return seconds_before + (clock() - start); };

  Tree& tree = search.tree();
  tree.clear();
  SearchResult result;
  std::deque<InFlight> in_flight;

  // Completes the oldest iteration in flight; the only place outcomes enter the
  // tree and the journal, so both follow iteration order.
  // A skipped evaluation drops its node and every newer one in flight (their
  // evaluations finish first; they run again, from their cached steps, when the
  // search selects them again): node ids stay iteration order.
  const auto skip_oldest = [&](const std::string& why) {
    const JournalRecord r = in_flight.front().record;
    for (InFlight& f : in_flight)
      if (!f.known && f.future.valid() &&
          f.future.wait_for(std::chrono::seconds(0)) != std::future_status::deferred)
        f.future.wait();
    for (auto it = in_flight.rbegin(); it != in_flight.rend(); ++it) search.abandon(it->record.node);
    in_flight.clear();
    search.skip(r.parent, action_key(r.action));
    result.skipped.push_back("node " + std::to_string(r.node) + " (parent " + std::to_string(r.parent) +
                             "): " + why);
  };
  const auto commit_oldest = [&] {
    InFlight& f = in_flight.front();
    if (!f.known) {
      try {
        f.record.outcome = f.future.get();  // may throw: handled by the caller
      } catch (const Skipped& e) {
        skip_oldest(e.what());
        return;
      }
    }
    search.complete(f.record.node, f.record.outcome);
    if (!f.known) {
      journal.append(f.record, seconds_now());
      ++result.evaluated;
    }
    in_flight.pop_front();
  };

  // 1. Replay, in the same window as a live run.
  const std::vector<JournalRecord> records = journal.records();
  try {
    for (const JournalRecord& r : records) {
      while (in_flight.size() >= window) commit_oldest();
      // Only with another P than the recording run: the parent may still be in flight.
      while (r.parent < tree.size() && tree.node(r.parent).pending) commit_oldest();
      if (r.node != tree.size())
        throw std::invalid_argument("record " + std::to_string(r.iteration) + " is out of order");
      search.begin_expansion(Expansion{r.parent, r.action});
      in_flight.push_back(InFlight{r, true, {}});
    }
    result.replayed = static_cast<int>(records.size());
  } catch (const std::invalid_argument& e) {
    journal.reset(std::string("cannot be replayed (") + e.what() + ")");
    tree.clear();
    in_flight.clear();
  }

  // 2. New iterations.
  const bool capped = budget.iterations > 0 || budget.seconds > 0;
  const auto budget_left = [&] {
    if (!capped) return false;
    // A skipped action spends one iteration of this run (its own), not the
    // journal's: the next run finds the budget short by one and tries it again.
    if (budget.iterations > 0 &&
        tree.size() - 1 + static_cast<int>(result.skipped.size()) >= budget.iterations)
      return false;
    if ((budget.seconds > 0 && seconds_now() >= budget.seconds) ||
        (options.stop_at > 0 && clock() >= options.stop_at)) {
      result.time_up = true;
      return false;
    }
    return true;
  };
  const auto launch = policy_for(window);
  try {
    while (true) {
      while (in_flight.size() >= window) commit_oldest();
      if (!budget_left()) break;
      std::optional<Expansion> e = search.select();
      if (!e) {
        if (in_flight.empty()) {
          result.exhausted = true;
          break;
        }
        commit_oldest();  // a pending node may open new choices
        continue;
      }
      EvalRequest request;
      request.parent = e->parent;
      request.parent_steps =
          e->parent == kRoot ? json::object() : tree.node(e->parent).outcome.steps;
      request.action = e->action;
      request.node = search.begin_expansion(*e);
      request.iteration = request.node - 1;
      request.depth = tree.node(request.node).depth;
      InFlight f;
      f.record.iteration = request.iteration;
      f.record.node = request.node;
      f.record.parent = request.parent;
      f.record.action = request.action;
      try {
        f.future =
            std::async(launch, [&evaluator, request] { return evaluator.evaluate(request); });
      } catch (...) {  // no thread to be had: this node never ran
        search.abandon(request.node);
        throw;
      }
      in_flight.push_back(std::move(f));
    }
    while (!in_flight.empty()) commit_oldest();
  } catch (...) {
    // Let every evaluation in flight finish (they reference the evaluator; their
    // results and exceptions are dropped), then
    // drop their nodes, newest first: the tree keeps only completed iterations.
    for (InFlight& f : in_flight) {
      if (f.known || !f.future.valid()) continue;
      // A deferred evaluation (parallel 1) has not started: dropping it is enough.
      if (f.future.wait_for(std::chrono::seconds(0)) == std::future_status::deferred) continue;
      f.future.wait();
    }
    for (auto it = in_flight.rbegin(); it != in_flight.rend(); ++it)
      if (tree.node(it->record.node).pending) search.abandon(it->record.node);
    throw;
  }

  result.iterations = tree.completed();
  result.seconds = result.evaluated > 0 ? seconds_now() : seconds_before;
  result.best = tree.best();
  result.best_speedup = tree.node(result.best).outcome.speedup;
  return result;
}

}  // namespace forge::mcts
