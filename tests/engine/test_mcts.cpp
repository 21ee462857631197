#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

#include "engine/builder.h"
#include "engine/journal.h"
#include "engine/mcts.h"
#include "store/store.h"
#include "util/hash.h"

namespace forge::mcts {
using nlohmann::json;
using S = Outcome::Status;

TEST_SUITE_BEGIN("engine::mcts");

namespace {

constexpr const char* kTarget = "m/_softmax/abc123";

Action strategy(const std::string& name, json params = json::object()) {
  return Action{"strategy", name, std::move(params), ""};
}

// A number in [0, 1) from hex digits [at, at + 8) of a digest.
double frac(const std::string& hex, size_t at) {
  return static_cast<double>(std::stoul(hex.substr(at, 8), nullptr, 16)) / 4294967296.0;
}

// Offers `width` actions under every node ("s0", "s1", ...), shuffled by the
// search's rng when `shuffle`; `custom` replaces that when set.
class FakeProposer : public Proposer {
 public:
  int width = 3;
  bool shuffle = false;
  int calls = 0;
  std::function<std::vector<Action>(const Tree&, NodeId)> custom;

  std::vector<Action> actions(const Tree& tree, NodeId parent, Rng& rng) override {
    ++calls;
    if (custom) return custom(tree, parent);
    std::vector<Action> out;
    for (int j = 0; j < width; ++j) out.push_back(strategy("s" + std::to_string(j), {{"j", j}}));
    if (shuffle) std::shuffle(out.begin(), out.end(), rng);
    return out;
  }
};

// The candidate an action becomes: a digest of its parent's candidate and the
// action, found through the parent's steps as the real evaluator will.
std::string candidate_of(const EvalRequest& r) {
  std::string parent = "stock";
  if (r.parent_steps.contains("source")) parent = r.parent_steps["source"].get<std::string>();
  return sha256_hex(parent + "|" + action_key(r.action));
}

// Some candidates fail (compile error, wrong result, crash); the others are
// verified with a speedup in [0.7, 2.0), all decided by the candidate's digest.
Outcome default_judge(const std::string& source, const EvalRequest&) {
  const double u = frac(source, 0);
  if (u < 0.12) return Outcome{S::CompileError, 0, "error: expected ';'"};
  if (u < 0.18) return Outcome{S::WrongResult, 0, "max abs error 0.3"};
  if (u < 0.22) return Outcome{S::Crash, 0, "illegal memory access"};
  const double speedup = 0.7 + 1.3 * frac(source, 8);
  return Outcome{speedup > 1 ? S::Ok : S::NotFaster, speedup};
}

class FakeEvaluator : public Evaluator {
 public:
  std::function<Outcome(const std::string&, const EvalRequest&)> judge = default_judge;
  int throw_at_iteration = -1;  // an interruption (Ctrl-C, a dead worker)
  std::function<void(const std::string&)> delay;
  std::atomic<int> calls{0};
  std::atomic<int> max_running{0};
  std::atomic<int> max_distinct_parents{0};
  std::mutex mutex;
  std::vector<std::string> sources;  // evaluated without throwing
  std::multiset<NodeId> running_parents;

  Outcome evaluate(const EvalRequest& r) override {
    ++calls;
    const std::string source = candidate_of(r);
    {
      std::lock_guard lock(mutex);
      running_parents.insert(r.parent);
      const int running = static_cast<int>(running_parents.size());
      const int distinct =
          static_cast<int>(std::set<NodeId>(running_parents.begin(), running_parents.end()).size());
      max_running = std::max(max_running.load(), running);
      max_distinct_parents = std::max(max_distinct_parents.load(), distinct);
    }
    if (delay) delay(source);
    {
      std::lock_guard lock(mutex);
      running_parents.erase(running_parents.find(r.parent));
    }
    if (r.iteration == throw_at_iteration) throw std::runtime_error("interrupted");
    Outcome o = judge(source, r);
    o.steps["source"] = source;
    std::lock_guard lock(mutex);
    sources.push_back(source);
    return o;
  }
};

// Counts and forwards to a memory store.
class CountingStore : public store::Store {
 public:
  std::string put_object(std::string_view b) override { return m_inner->put_object(b); }
  std::optional<std::string> get_object(const std::string& d) override {
    return m_inner->get_object(d);
  }
  bool has_object(const std::string& d) override { return m_inner->has_object(d); }
  void put_action(const std::string& k, std::string_view r) override { m_inner->put_action(k, r); }
  std::optional<std::string> get_action(const std::string& k) override {
    return m_inner->get_action(k);
  }
  void put_ref(const std::string& n, std::string_view v) override {
    ++ref_writes;
    m_inner->put_ref(n, v);
  }
  std::optional<std::string> get_ref(const std::string& n) override { return m_inner->get_ref(n); }
  int ref_writes = 0;

 private:
  std::unique_ptr<store::Store> m_inner = store::make_memory_store();
};

Budget budget(int iterations, int parallel = 1, double seconds = 0) {
  Budget b;
  b.iterations = iterations;
  b.parallel = parallel;
  b.seconds = seconds;
  return b;
}

struct Run {
  SearchResult result;
  std::string journal;  // the journal's text afterwards
  std::string tree;     // Tree::to_json()
  std::vector<std::string> warnings;
  Tree state;
};

Run run(store::Store& store, Proposer& proposer, Evaluator& evaluator, const Budget& b,
        SearchParams params = {}, std::string context = "ctx", RunOptions options = {}) {
  if (!options.clock) options.clock = [] { return 0.0; };  // "seconds" stays 0: stable text
  Run out;
  Search search(out.state, proposer, params);
  Journal journal(store, journal_ref(kTarget), context, params.to_json(),
                  [&](const std::string& w) { out.warnings.push_back(w); });
  out.result = run_search(search, evaluator, b, journal, options);
  out.journal = journal.text();
  out.tree = out.state.to_json().dump();
  return out;
}

// Parent, action, status and visits of every node: the tree's shape.
std::string shape(const Tree& tree) {
  std::string s;
  for (const Node& n : tree.nodes())
    s += std::to_string(n.id) + "<" + std::to_string(n.parent) + " " + n.key + " " +
         status_name(n.outcome.status) + " v" + std::to_string(n.visits) + "\n";
  return s;
}

void check_visit_invariants(const Tree& tree) {
  CHECK(tree.pending() == 0);
  CHECK(tree.node(kRoot).visits == tree.completed());
  for (const Node& n : tree.nodes()) {
    int children = 0;
    for (NodeId c : n.children) children += tree.node(c).visits;
    CHECK(n.virtual_loss == 0);
    CHECK(n.visits == children + (n.id == kRoot ? 0 : 1));
  }
}

}  // namespace

TEST_CASE("reward is log speedup, clipped; failures are penalised by kind") {
  CHECK(reward(Outcome{S::Ok, 2.0}) == doctest::Approx(std::log(2.0)));
  CHECK(reward(Outcome{S::NotFaster, 0.5}) == doctest::Approx(std::log(0.5)));
  CHECK(reward(Outcome{S::NotFaster, 1e-9}) == kRewardMin);
  CHECK(reward(Outcome{S::Ok, 1e9}) == kRewardMax);
  CHECK(reward(Outcome{S::StaticReject}) == -1.0);
  CHECK(reward(Outcome{S::CompileError}) == -1.0);
  CHECK(reward(Outcome{S::WrongResult}) == -1.5);
  CHECK(reward(Outcome{S::Crash}) == -2.0);
  CHECK(reward(Outcome{S::Timeout}) == -2.0);
  CHECK_THROWS_AS(reward(Outcome{S::Ok, 0}), std::invalid_argument);
  CHECK_THROWS_AS(reward(Outcome{S::Ok, std::nan("")}), std::invalid_argument);
  CHECK_THROWS_AS(reward(Outcome{S::NotFaster, INFINITY}), std::invalid_argument);
  // The status names are the journal's on-disk values.
  for (S s :
       {S::Ok, S::CompileError, S::StaticReject, S::WrongResult, S::Crash, S::Timeout, S::NotFaster})
    CHECK(parse_status(status_name(s)) == s);
  CHECK(std::string(status_name(S::CompileError)) == "compile_error");
  CHECK_FALSE(parse_status("OK"));
}

TEST_CASE("scale-free: the same relative speedups at 5 us and 5 ms give the same tree") {
  // The evaluator measures times; only their ratio reaches the search.
  auto timed_judge = [](double stock_us) {
    return [stock_us](const std::string& source, const EvalRequest&) {
      if (frac(source, 0) < 0.15) return Outcome{S::CompileError};
      const double candidate_us = stock_us * (0.4 + 1.2 * frac(source, 8));
      const double speedup = stock_us / candidate_us;
      return Outcome{speedup > 1 ? S::Ok : S::NotFaster, speedup};
    };
  };
  FakeProposer proposer;
  proposer.width = 4;
  FakeEvaluator at_5us, at_5ms;
  at_5us.judge = timed_judge(5.0);
  at_5ms.judge = timed_judge(5000.0);
  auto store_a = store::make_memory_store();
  auto store_b = store::make_memory_store();
  Run a = run(*store_a, proposer, at_5us, budget(60));
  Run b = run(*store_b, proposer, at_5ms, budget(60));
  CHECK(a.result.iterations == 60);
  CHECK(shape(a.state) == shape(b.state));
  CHECK(a.state.node(a.result.best).key == b.state.node(b.result.best).key);
}

TEST_CASE("each iteration is one visit: root visits == completed iterations == child sum") {
  FakeProposer proposer;
  proposer.width = 5;
  for (int parallel : {1, 4}) {
    CAPTURE(parallel);
    FakeEvaluator evaluator;
    auto store = store::make_memory_store();
    Run r = run(*store, proposer, evaluator, budget(40, parallel));
    CHECK(r.result.iterations == 40);
    CHECK(r.result.evaluated == 40);
    CHECK(evaluator.calls == 40);
    check_visit_invariants(r.state);
    // The root's value is the sum of every node's reward, each counted once.
    double rewards = 0;
    for (const Node& n : r.state.nodes())
      if (n.id != kRoot) rewards += reward(n.outcome);
    CHECK(r.state.node(kRoot).value_sum == doctest::Approx(rewards));
  }
}

TEST_CASE("complete() counts a visit once and refuses a second completion") {
  Tree tree;
  FakeProposer proposer;
  Search search(tree, proposer);
  auto e = search.select();
  REQUIRE(e);
  const NodeId a = search.begin_expansion(*e);
  CHECK(tree.node(a).pending);
  CHECK(tree.node(kRoot).virtual_loss == 1);
  CHECK(tree.node(kRoot).visits == 0);
  search.complete(a, Outcome{S::Ok, 1.5});
  CHECK(tree.node(kRoot).visits == 1);
  CHECK(tree.node(a).visits == 1);
  CHECK(tree.node(kRoot).virtual_loss == 0);
  CHECK_THROWS_AS(search.complete(a, Outcome{S::Ok, 1.5}), std::invalid_argument);
  CHECK_THROWS_AS(search.complete(kRoot, Outcome{S::Ok, 1.5}), std::invalid_argument);
  CHECK(tree.node(kRoot).visits == 1);
  // The same action twice under one parent is one try.
  CHECK_THROWS_AS(search.begin_expansion(Expansion{kRoot, tree.node(a).action}),
                  std::invalid_argument);
  // A verified outcome without a usable speedup is refused before anything changes.
  const NodeId b = search.begin_expansion(*search.select());
  CHECK_THROWS_AS(search.complete(b, Outcome{S::Ok, -1}), std::invalid_argument);
  CHECK(tree.node(b).pending);
  CHECK(tree.node(kRoot).visits == 1);
}

TEST_CASE("progressive widening: at most ceil(k * visits^alpha) children per node") {
  Tree tree;
  FakeProposer proposer;
  proposer.width = 1000;  // never the limiting factor
  Search search(tree, proposer);
  CHECK(search.widening_limit(kRoot) == 2);  // max(1, visits) = 1
  for (int parallel : {1, 4}) {
    CAPTURE(parallel);
    FakeEvaluator evaluator;
    auto store = store::make_memory_store();
    Run r = run(*store, proposer, evaluator, budget(150, parallel));
    CHECK(r.result.iterations == 150);
    bool some_node_full = false;
    for (const Node& n : r.state.nodes()) {
      const auto limit = static_cast<size_t>(std::ceil(2.0 * std::sqrt(std::max(1, n.visits))));
      CHECK(n.children.size() <= limit);
      if (n.visits > 1 && n.children.size() == limit) some_node_full = true;
    }
    CHECK(some_node_full);  // the bound is reached, not merely respected
    // The root (150 visits) has ceil(2 * sqrt(150)) = 25 children at most.
    CHECK(r.state.node(kRoot).children.size() <= 25);
    CHECK(r.state.node(kRoot).children.size() >= 20);
  }
}

TEST_CASE("same seed and same outcomes give a byte-identical tree and journal") {
  FakeProposer proposer;
  proposer.width = 4;
  proposer.shuffle = true;  // the seed matters
  for (int parallel : {1, 3}) {
    CAPTURE(parallel);
    FakeEvaluator e1, e2, e3;
    auto s1 = store::make_memory_store();
    auto s2 = store::make_memory_store();
    auto s3 = store::make_memory_store();
    SearchParams params;
    params.seed = 42;
    Run a = run(*s1, proposer, e1, budget(30, parallel), params);
    Run b = run(*s2, proposer, e2, budget(30, parallel), params);
    CHECK(a.journal == b.journal);
    CHECK(a.tree == b.tree);
    CHECK(*s1->get_ref(journal_ref(kTarget)) == *s2->get_ref(journal_ref(kTarget)));
    params.seed = 43;
    Run c = run(*s3, proposer, e3, budget(30, parallel), params);
    CHECK(shape(a.state) != shape(c.state));
  }
}

TEST_CASE("raising the budget from N to M runs exactly M-N new iterations") {
  FakeProposer proposer;
  proposer.width = 4;
  int parallel = 1;
  SUBCASE("one at a time") {
    parallel = 1;
  }
  SUBCASE("three in flight") {
    parallel = 3;
  }
  auto store = store::make_memory_store();
  FakeEvaluator first, second, single;
  Run n = run(*store, proposer, first, budget(17, parallel));
  CHECK(first.calls == 17);
  Run m = run(*store, proposer, second, budget(40, parallel));
  CHECK(second.calls == 23);
  CHECK(m.result.replayed == 17);
  CHECK(m.result.evaluated == 23);
  CHECK(m.result.iterations == 40);
  // Nothing evaluated in the first run is evaluated again.
  for (const std::string& s : first.sources)
    CHECK(std::count(second.sources.begin(), second.sources.end(), s) == 0);
  // The same as one run with budget M.
  auto fresh = store::make_memory_store();
  Run one = run(*fresh, proposer, single, budget(40, parallel));
  CHECK(m.journal == one.journal);
  CHECK(m.tree == one.tree);
}

TEST_CASE("an unchanged budget does no work: no proposals, evaluations or writes") {
  FakeProposer proposer;
  CountingStore store;
  FakeEvaluator e1, e2;
  Run first = run(store, proposer, e1, budget(12, 2));
  CHECK(e1.calls == 12);
  CHECK(store.ref_writes == 12);  // one write per completed iteration
  const int proposals = proposer.calls;
  Run again = run(store, proposer, e2, budget(12, 2));
  CHECK(e2.calls == 0);
  CHECK(proposer.calls == proposals);
  CHECK(store.ref_writes == 12);
  CHECK(again.result.replayed == 12);
  CHECK(again.result.evaluated == 0);
  CHECK(again.tree == first.tree);
  CHECK(again.warnings.empty());
  // A lower budget replays everything and runs nothing.
  FakeEvaluator e3;
  Run lower = run(store, proposer, e3, budget(5, 2));
  CHECK(e3.calls == 0);
  CHECK(lower.result.iterations == 12);
}

TEST_CASE("an interrupted build resumes without redoing finished iterations") {
  FakeProposer proposer;
  proposer.width = 4;
  int parallel = 1;
  SUBCASE("one at a time") {
    parallel = 1;
  }
  SUBCASE("three in flight") {
    parallel = 3;
  }
  auto store = store::make_memory_store();
  FakeEvaluator broken;
  broken.throw_at_iteration = 13;
  Tree tree;
  Search search(tree, proposer);
  {
    Journal journal(*store, journal_ref(kTarget), "ctx", search.params().to_json(), nullptr);
    RunOptions options;
    options.clock = [] { return 0.0; };
    CHECK_THROWS_WITH(run_search(search, broken, budget(30, parallel), journal, options),
                      "interrupted");
    CHECK(journal.records().size() == 13);
    // The tree keeps the completed iterations only, consistently.
    CHECK(tree.completed() == 13);
    check_visit_invariants(tree);
  }
  std::set<std::string> journaled;
  {
    Journal journal(*store, journal_ref(kTarget), "ctx", search.params().to_json(), nullptr);
    for (const auto& r : journal.records())
      journaled.insert(r.outcome.steps["source"].get<std::string>());
  }
  CHECK(journaled.size() == 13);
  FakeEvaluator resumed;
  Run r = run(*store, proposer, resumed, budget(30, parallel));
  CHECK(resumed.calls == 17);
  CHECK(r.result.replayed == 13);
  for (const std::string& s : resumed.sources) CHECK(journaled.count(s) == 0);
  // As if never interrupted.
  auto fresh = store::make_memory_store();
  FakeEvaluator whole;
  Run one = run(*fresh, proposer, whole, budget(30, parallel));
  CHECK(r.journal == one.journal);
  CHECK(r.tree == one.tree);
}

// A model request that failed costs its own action: the search goes on with
// the others, nothing is journaled for it, and the next run asks it again.
TEST_CASE("a skipped evaluation drops its node; the search goes on; the next run retries it") {
  FakeProposer proposer;
  proposer.width = 4;
  int parallel = 1;
  SUBCASE("one at a time") {
    parallel = 1;
  }
  SUBCASE("three in flight") {
    parallel = 3;
  }
  auto store = store::make_memory_store();
  // The first evaluation of one action under the root fails as a request.
  struct Flaky : FakeEvaluator {
    std::string failing = action_key(strategy("s2", {{"j", 2}}));
    std::atomic<int> failures{0};
    Outcome evaluate(const EvalRequest& r) override {
      if (r.parent == kRoot && action_key(r.action) == failing) {
        ++failures;
        throw Skipped("no reply within 300 s");
      }
      return FakeEvaluator::evaluate(r);
    }
  } flaky;
  Run first = run(*store, proposer, flaky, budget(12, parallel));
  CHECK(flaky.failures == 1);  // not asked again in this run
  REQUIRE(first.result.skipped.size() == 1);
  CHECK(first.result.skipped[0].find("no reply within 300 s") != std::string::npos);
  CHECK(first.result.iterations == 11);  // the skipped action spent its iteration
  check_visit_invariants(first.state);
  bool under_root = false;
  for (const Node& n : first.state.nodes())
    if (n.parent == kRoot && n.key == flaky.failing) under_root = true;
  CHECK_FALSE(under_root);
  // The next run, same budget, replays the journal and spends the iteration
  // left on the action that was skipped.
  FakeEvaluator healthy;
  Run second = run(*store, proposer, healthy, budget(12, parallel));
  CHECK(second.result.replayed == 11);
  CHECK(second.result.evaluated == 1);
  CHECK(second.result.skipped.empty());
  const Node& last = second.state.nodes().back();
  CHECK(last.parent == kRoot);
  CHECK(last.key == flaky.failing);
  check_visit_invariants(second.state);
}

TEST_CASE("virtual loss sends concurrent expansions down different branches") {
  // Root offers exactly two actions; each child offers many.
  FakeProposer proposer;
  proposer.custom = [](const Tree&, NodeId parent) {
    std::vector<Action> out;
    if (parent == kRoot) return std::vector<Action>{strategy("a"), strategy("b")};
    for (int j = 0; j < 10; ++j) out.push_back(strategy("v", {{"j", j}}));
    return out;
  };
  Tree tree;
  Search search(tree, proposer);
  const NodeId a = search.begin_expansion(*search.select());
  search.complete(a, Outcome{S::Ok, 1.5});
  const NodeId b = search.begin_expansion(*search.select());
  search.complete(b, Outcome{S::Ok, 1.4});
  CHECK(tree.node(a).action.strategy == "a");
  CHECK(tree.node(b).action.strategy == "b");
  CHECK(search.uct(a) > search.uct(b));

  // Four in flight at once: the first goes under a (better), the second under b
  // because a now carries a virtual loss.
  std::vector<NodeId> in_flight;
  for (int i = 0; i < 4; ++i) {
    auto e = search.select();
    REQUIRE(e);
    in_flight.push_back(search.begin_expansion(*e));
  }
  CHECK(tree.node(in_flight[0]).parent == a);
  CHECK(tree.node(in_flight[1]).parent == b);
  std::set<std::pair<NodeId, std::string>> distinct;
  for (NodeId n : in_flight) distinct.insert({tree.node(n).parent, tree.node(n).key});
  CHECK(distinct.size() == 4);
  CHECK(tree.node(kRoot).virtual_loss == 4);
  for (NodeId n : in_flight) search.complete(n, Outcome{S::NotFaster, 0.9});
  check_visit_invariants(tree);
}

TEST_CASE("parallel evaluations overlap and the journal does not depend on their timing") {
  FakeProposer proposer;
  proposer.width = 4;
  FakeEvaluator slow, fast;
  slow.delay = [](const std::string& source) {
    std::this_thread::sleep_for(
        std::chrono::milliseconds(2 + static_cast<int>(frac(source, 16) * 12)));
  };
  auto s1 = store::make_memory_store();
  auto s2 = store::make_memory_store();
  Run a = run(*s1, proposer, slow, budget(32, 4));
  Run b = run(*s2, proposer, fast, budget(32, 4));
  CHECK(slow.max_running >= 2);
  CHECK(slow.max_running <= 4);
  CHECK(slow.max_distinct_parents >= 2);  // in-flight work spread over nodes
  CHECK(a.journal == b.journal);
  CHECK(a.tree == b.tree);
  check_visit_invariants(a.state);
}

TEST_CASE("failures penalised by kind steer the search away from a failing branch") {
  // Root offers two actions; everything under the first `root_actions[0]` gets
  // outcome `first`, everything under the second gets `second`.
  auto race = [](Outcome first, Outcome second) {
    FakeProposer proposer;
    proposer.custom = [](const Tree&, NodeId parent) {
      if (parent == kRoot) return std::vector<Action>{strategy("x"), strategy("y")};
      std::vector<Action> out;
      for (int j = 0; j < 50; ++j) out.push_back(strategy("v", {{"j", j}}));
      return out;
    };
    FakeEvaluator evaluator;
    evaluator.judge = [first, second](const std::string&, const EvalRequest& r) {
      return r.action.strategy == "x" || r.parent_steps.value("branch", "") == "x" ? first : second;
    };
    // Remember the branch through the steps, as a real evaluator remembers sources.
    struct Branching : Evaluator {
      FakeEvaluator& inner;
      explicit Branching(FakeEvaluator& e) : inner(e) {}
      Outcome evaluate(const EvalRequest& r) override {
        Outcome o = inner.evaluate(r);
        o.steps["branch"] =
            r.parent == kRoot ? r.action.strategy : r.parent_steps["branch"].get<std::string>();
        return o;
      }
    } branching(evaluator);
    auto store = store::make_memory_store();
    Run r = run(*store, proposer, branching, budget(40));
    REQUIRE(r.state.node(1).action.strategy == "x");
    REQUIRE(r.state.node(2).action.strategy == "y");
    return std::pair{r.state.node(1).visits, r.state.node(2).visits};
  };
  {
    auto [bad, good] = race(Outcome{S::CompileError}, Outcome{S::Ok, 1.2});
    CAPTURE(bad);
    CAPTURE(good);
    CHECK(good > 4 * bad);
  }
  {
    auto [crash, compile_error] = race(Outcome{S::Crash}, Outcome{S::CompileError});
    CAPTURE(crash);
    CAPTURE(compile_error);
    CHECK(compile_error > crash);
  }
  {
    auto [timeout, wrong] = race(Outcome{S::Timeout}, Outcome{S::WrongResult});
    CHECK(wrong > timeout);
  }
}

TEST_CASE("the best node is the highest verified speedup, the earliest on ties") {
  FakeProposer proposer;
  proposer.width = 10;
  Tree tree;
  Search search(tree, proposer);
  CHECK(tree.best() == kRoot);  // stock until something beats it
  auto add = [&](Outcome o) {
    auto e = search.select();
    REQUIRE(e);
    NodeId n = search.begin_expansion(*e);
    search.complete(n, o);
    return n;
  };
  add(Outcome{S::NotFaster, 0.9});
  add(Outcome{S::CompileError, 9.0});  // a speedup on a failure counts for nothing
  CHECK(tree.best() == kRoot);
  add(Outcome{S::Ok, 1.3});
  const NodeId first_best = add(Outcome{S::Ok, 1.7});
  add(Outcome{S::Ok, 1.7});
  add(Outcome{S::WrongResult});
  CHECK(tree.best() == first_best);
  CHECK(tree.node(2).outcome.speedup == 0);

  // And through the driver.
  FakeEvaluator evaluator;
  auto store = store::make_memory_store();
  Run r = run(*store, proposer, evaluator, budget(25));
  double best = 1.0;
  for (const Node& n : r.state.nodes())
    if (n.outcome.verified()) best = std::max(best, n.outcome.speedup);
  CHECK(r.result.best_speedup == best);
  CHECK(r.state.node(r.result.best).outcome.speedup == best);
  for (NodeId id = 0; id < r.result.best; ++id) CHECK(r.state.node(id).outcome.speedup < best);
}

TEST_CASE("an exhausted proposer ends the search early; a rerun does nothing") {
  FakeProposer proposer;
  proposer.custom = [](const Tree&, NodeId parent) {
    if (parent == kRoot) return std::vector<Action>{strategy("a"), strategy("b"), strategy("c")};
    if (parent == 1) return std::vector<Action>{strategy("a1")};
    return std::vector<Action>{};
  };
  for (int parallel : {1, 3}) {
    CAPTURE(parallel);
    CountingStore store;
    FakeEvaluator e1, e2;
    Run first = run(store, proposer, e1, budget(10, parallel));
    CHECK(first.result.exhausted);
    CHECK(first.result.iterations == 4);  // a, b, c, a1
    CHECK(e1.calls == 4);
    const int writes = store.ref_writes;
    Run again = run(store, proposer, e2, budget(10, parallel));
    CHECK(again.result.exhausted);
    CHECK(e2.calls == 0);
    CHECK(store.ref_writes == writes);
  }
}

TEST_CASE("a build's deadline (RunOptions::stop_at) stops the search; the next run goes on") {
  FakeProposer proposer;
  double now = 100;
  RunOptions options;
  options.clock = [&] { return now; };
  options.stop_at = 103.5;  // after the 4th evaluation (each takes 1 s)
  FakeEvaluator evaluator;
  evaluator.delay = [&](const std::string&) { now += 1.0; };
  auto store = store::make_memory_store();
  Run a = run(*store, proposer, evaluator, budget(10), {}, "ctx", options);
  CHECK(a.result.time_up);
  CHECK(a.result.iterations == 4);
  CHECK(evaluator.calls == 4);
  // Past it, nothing starts; the journal is kept.
  Run b = run(*store, proposer, evaluator, budget(10), {}, "ctx", options);
  CHECK(b.result.time_up);
  CHECK(b.result.iterations == 4);
  CHECK(evaluator.calls == 4);
  // Without one (the next build), the search continues to its budget.
  options.stop_at = 0;
  Run c = run(*store, proposer, evaluator, budget(10), {}, "ctx", options);
  CHECK_FALSE(c.result.time_up);
  CHECK(c.result.iterations == 10);
  CHECK(evaluator.calls == 10);
}

TEST_CASE("a time budget stops the search; the time spent carries over to the next build") {
  FakeProposer proposer;
  double now = 100;
  RunOptions options;
  options.clock = [&] { return now; };
  FakeEvaluator evaluator;
  evaluator.delay = [&](const std::string&) { now += 1.0; };  // parallel 1: same thread
  auto store = store::make_memory_store();
  Run a = run(*store, proposer, evaluator, budget(0, 1, 5.5), {}, "ctx", options);
  CHECK(a.result.time_up);
  CHECK(a.result.iterations == 6);
  CHECK(a.result.seconds == 6.0);
  Run b = run(*store, proposer, evaluator, budget(0, 1, 5.5), {}, "ctx", options);
  CHECK(evaluator.calls == 6);  // nothing more
  CHECK(b.result.time_up);
  Run c = run(*store, proposer, evaluator, budget(0, 1, 8.5), {}, "ctx", options);
  CHECK(c.result.iterations == 9);
  CHECK(evaluator.calls == 9);
  // Iterations cap first when both are given.
  Run d = run(*store, proposer, evaluator, budget(11, 1, 100), {}, "ctx", options);
  CHECK(d.result.iterations == 11);
  CHECK_FALSE(d.result.time_up);
  // No budget at all runs nothing.
  auto empty = store::make_memory_store();
  FakeEvaluator idle;
  Run e = run(*empty, proposer, idle, budget(0, 1, 0), {}, "ctx", options);
  CHECK(idle.calls == 0);
  CHECK(e.result.iterations == 0);
}

TEST_CASE("changing the GPU or the toolchain invalidates only what depends on it") {
  // A realistic evaluator: compile keyed on (source, toolchain), evaluation on
  // (binary, gpu), both through the real Builder and action cache; the journal's
  // context is a key over what outcomes depend on.
  struct StepEvaluator : Evaluator {
    Builder& builder;
    std::string gpu, toolchain;
    int compiles = 0, evaluations = 0;
    explicit StepEvaluator(Builder& b) : builder(b) {}
    Outcome evaluate(const EvalRequest& r) override {
      const std::string source = candidate_of(r);
      StepSpec compile;
      compile.kind = "compile";
      compile.inputs = {{"source", source}, {"toolchain", toolchain}};
      compile.run = [&] {
        ++compiles;
        return json{{"status", "ok"}, {"binary", sha256_hex(source + toolchain)}};
      };
      const auto binary = builder.run(compile).record["binary"].get<std::string>();
      StepSpec bench;
      bench.kind = "evaluate";
      bench.inputs = {{"binary", binary}, {"gpu", gpu}};
      bench.run = [&] {
        ++evaluations;
        return json{{"status", "ok"}, {"speedup", 0.7 + 1.3 * frac(source, 8)}};
      };
      const double speedup = builder.run(bench).record["speedup"].get<double>();
      Outcome o{speedup > 1 ? S::Ok : S::NotFaster, speedup};
      o.steps = {{"source", source}, {"compile", step_key(compile)}, {"evaluate", step_key(bench)}};
      return o;
    }
  };
  auto store = store::make_memory_store();
  Progress progress(false);
  Builder builder(*store, progress);
  FakeProposer proposer;
  proposer.width = 4;
  auto build = [&](const std::string& gpu, const std::string& toolchain) {
    StepEvaluator evaluator(builder);
    evaluator.gpu = gpu;
    evaluator.toolchain = toolchain;
    Hasher context;
    context.add("target", kTarget).add("gpu", gpu).add("toolchain", toolchain);
    Run r = run(*store, proposer, evaluator, budget(10), {}, context.hex());
    return std::tuple{evaluator.compiles, evaluator.evaluations, r};
  };
  auto [c1, e1, r1] = build("H200", "nvcc 13.0");
  CHECK(c1 == 10);
  CHECK(e1 == 10);
  auto [c2, e2, r2] = build("H200", "nvcc 13.0");  // unchanged: nothing
  CHECK(c2 == 0);
  CHECK(e2 == 0);
  CHECK(r2.warnings.empty());
  auto [c3, e3, r3] = build("B200", "nvcc 13.0");  // new GPU: re-measure, no recompiling
  CHECK(c3 == 0);
  CHECK(e3 == 10);
  REQUIRE(r3.warnings.size() == 1);
  CHECK(r3.warnings[0].find("starting over") != std::string::npos);
  auto [c4, e4, r4] = build("B200", "nvcc 13.1");  // new toolchain: both
  CHECK(c4 == 10);
  CHECK(e4 == 10);
  auto [c5, e5, r5] = build("H200", "nvcc 13.0");  // back: all in the action cache
  CHECK(c5 == 0);
  CHECK(e5 == 0);
  CHECK(r5.tree == r1.tree);
}

TEST_SUITE_END();

}  // namespace forge::mcts
