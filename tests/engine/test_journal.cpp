#include <doctest/doctest.h>

#include <atomic>
#include <functional>
#include <stdexcept>

#include "engine/journal.h"
#include "engine/mcts.h"
#include "store/store.h"
#include "util/hash.h"

namespace forge::mcts {
using nlohmann::json;
using S = Outcome::Status;

TEST_SUITE_BEGIN("engine::Journal");

namespace {

const std::string kRef = journal_ref("m/_softmax/abc123");

// Three actions per node; outcomes from a digest of the candidate (parent's
// candidate + action), some of them failures with reasons.
class Proposer3 : public Proposer {
 public:
  std::vector<Action> actions(const Tree&, NodeId, Rng&) override {
    std::vector<Action> out;
    for (int j = 0; j < 3; ++j) out.push_back(Action{"strategy", "s", {{"j", j}}, "note"});
    return out;
  }
};

class Evaluator3 : public Evaluator {
 public:
  std::atomic<int> calls{0};
  Outcome evaluate(const EvalRequest& r) override {
    ++calls;
    const std::string parent = r.parent_steps.value("source", "stock");
    const std::string source = sha256_hex(parent + "|" + action_key(r.action));
    const double u =
        static_cast<double>(std::stoul(source.substr(0, 8), nullptr, 16)) / 4294967296.0;
    Outcome o;
    if (u < 0.25) {
      o = Outcome{S::CompileError, 0, "kernel.cu:3: error: \"x\" undefined"};
    } else {
      o = Outcome{u < 0.6 ? S::NotFaster : S::Ok, 0.4 + 1.5 * u};
    }
    o.steps = {{"source", source}, {"compile", sha256_hex("c" + source)}};
    return o;
  }
};

Budget budget(int iterations, int parallel = 1) {
  Budget b;
  b.iterations = iterations;
  b.parallel = parallel;
  return b;
}

struct Outcomes {
  SearchResult result;
  std::string text;
  std::vector<std::string> warnings;
  int calls = 0;
};

Outcomes search(store::Store& store, int iterations, int parallel = 1,
                const std::string& context = "ctx") {
  Outcomes out;
  Proposer3 proposer;
  Evaluator3 evaluator;
  Tree tree;
  Search s(tree, proposer);
  Journal journal(store, kRef, context, s.params().to_json(),
                  [&](const std::string& w) { out.warnings.push_back(w); });
  RunOptions options;
  options.clock = [] { return 0.0; };
  out.result = run_search(s, evaluator, budget(iterations, parallel), journal, options);
  out.text = journal.text();
  out.calls = evaluator.calls;
  return out;
}

std::vector<std::string> load_warnings(const std::string& text) {
  auto store = store::make_memory_store();
  store->put_ref(kRef, text);
  std::vector<std::string> warnings;
  Journal journal(*store, kRef, "ctx", SearchParams{}.to_json(),
                  [&](const std::string& w) { warnings.push_back(w); });
  CHECK(journal.records().empty());
  return warnings;
}

}  // namespace

TEST_CASE("format: a pinned one-record journal, and its round trip") {
  JournalRecord r;
  r.iteration = 0;
  r.node = 1;
  r.parent = 0;
  r.action = Action{"strategy", "warp_per_row", {{"block", 128}}, "from stock"};
  r.outcome = Outcome{S::Ok, 1.5, "", {{"compile", "k1"}}};
  JournalData data;
  data.seconds = 2.25;
  data.records.push_back(r);
  SearchParams params;
  params.seed = 7;
  const std::string text = format_journal(data, "ctx", params.to_json());
  CHECK(text ==
        R"({"context":"ctx","format":"forge-journal",)"
        R"("records":[{"action":{"kind":"strategy","note":"from stock","params":{"block":128},)"
        R"("strategy":"warp_per_row"},"i":0,"node":1,"outcome":{"speedup":1.5,"status":"ok",)"
        R"("steps":{"compile":"k1"}},"parent":0}],)"
        R"("search":{"exploration":0.7,"seed":7,"widening_alpha":0.5,"widening_k":2.0},)"
        R"("seconds":2.25,"version":2})");
  std::string why;
  auto back = parse_journal(text, "ctx", params.to_json(), &why);
  REQUIRE(back);
  CHECK(format_journal(*back, "ctx", params.to_json()) == text);
  CHECK(back->records[0].action.parent_note == "from stock");
  // Failures carry no speedup; a reason only when there is one.
  r.outcome = Outcome{S::Timeout, 3.0, "ran past 60 s"};
  data.records[0] = r;
  const std::string failed = format_journal(data, "ctx", params.to_json());
  CHECK(failed.find(R"("outcome":{"reason":"ran past 60 s","status":"timeout","steps":{}})") !=
        std::string::npos);
}

TEST_CASE("a version-1 journal is read: its \"slower\" is not_faster, written back as version 2") {
  SearchParams params;
  const std::string v1 =
      R"({"context":"ctx","format":"forge-journal",)"
      R"("records":[{"action":{"kind":"strategy","note":"","params":{},"strategy":"s"},"i":0,"node":1,)"
      R"("outcome":{"speedup":0.9,"status":"slower","steps":{}},"parent":0}],)"
      R"("search":{"exploration":0.7,"seed":0,"widening_alpha":0.5,"widening_k":2.0},)"
      R"("seconds":1.0,"version":1})";
  std::string why;
  auto back = parse_journal(v1, "ctx", params.to_json(), &why);
  INFO(why);
  REQUIRE(back);
  CHECK(back->records[0].outcome.status == S::NotFaster);
  const std::string v2 = format_journal(*back, "ctx", params.to_json());
  CHECK(v2.find(R"("status":"not_faster")") != std::string::npos);
  CHECK(v2.find(R"("version":2)") != std::string::npos);
  std::string v3 = v1;
  v3.replace(v3.find(R"("version":1)"), 11, R"("version":3)");
  CHECK_FALSE(parse_journal(v3, "ctx", params.to_json(), &why));
  CHECK(why.find("another format version") != std::string::npos);
}

TEST_CASE("a missing journal is empty and silent, and costs no write") {
  auto store = store::make_memory_store();
  std::vector<std::string> warnings;
  Journal journal(*store, kRef, "ctx", SearchParams{}.to_json(),
                  [&](const std::string& w) { warnings.push_back(w); });
  CHECK(journal.records().empty());
  CHECK(journal.seconds() == 0);
  CHECK(warnings.empty());
  CHECK_FALSE(store->get_ref(kRef));
}

TEST_CASE("the journal is flushed per completed iteration") {
  auto store = store::make_memory_store();
  Outcomes a = search(*store, 5);
  auto stored = store->get_ref(kRef);
  REQUIRE(stored);
  CHECK(*stored == a.text);
  Journal journal(*store, kRef, "ctx", SearchParams{}.to_json(), nullptr);
  REQUIRE(journal.records().size() == 5);
  for (int i = 0; i < 5; ++i) {
    CHECK(journal.records()[i].iteration == i);
    CHECK(journal.records()[i].node == i + 1);
  }
  // Appending out of sequence is a programming error.
  JournalRecord r = journal.records()[4];
  CHECK_THROWS_AS(journal.append(r, 0), std::invalid_argument);
  r.iteration = 5;
  r.node = 6;
  journal.append(r, 1.5);
  Journal again(*store, kRef, "ctx", SearchParams{}.to_json(), nullptr);
  CHECK(again.records().size() == 6);
  CHECK(again.seconds() == 1.5);
}

TEST_CASE("a journal truncated at every offset is a warning and a fresh start, never a crash") {
  auto reference_store = store::make_memory_store();
  const Outcomes reference = search(*reference_store, 8);
  const std::string& text = reference.text;
  REQUIRE(text.size() > 500);
  REQUIRE(text.find("compile_error") != std::string::npos);  // failures are in there too
  for (size_t cut = 0; cut < text.size(); ++cut) {
    CAPTURE(cut);
    auto store = store::make_memory_store();
    store->put_ref(kRef, text.substr(0, cut));
    Outcomes redone = search(*store, 8);
    REQUIRE(redone.warnings.size() == 1);
    CHECK(redone.warnings[0].find("search journal '" + kRef + "' ") == 0);
    CHECK(redone.warnings[0].find("; starting over") != std::string::npos);
    CHECK(redone.result.replayed == 0);
    CHECK(redone.calls == 8);
    CHECK(redone.text == text);  // the same search again
  }
  // Whole, it loads.
  auto store = store::make_memory_store();
  store->put_ref(kRef, text);
  Outcomes whole = search(*store, 8);
  CHECK(whole.warnings.empty());
  CHECK(whole.calls == 0);
}

TEST_CASE("malformed journals are warnings and a fresh start") {
  auto store = store::make_memory_store();
  const json good = json::parse(search(*store, 4).text);
  std::string expect;
  std::function<void(json&)> edit;
  SUBCASE("not an object") {
    edit = [](json& j) { j = json::array(); };
    expect = "is not a forge journal";
  }
  SUBCASE("wrong magic") {
    edit = [](json& j) { j["format"] = "ninja-log"; };
    expect = "is not a forge journal";
  }
  SUBCASE("other version") {
    edit = [](json& j) { j["version"] = kJournalVersion + 1; };
    expect = "has another format version";
  }
  SUBCASE("no seconds") {
    edit = [](json& j) { j.erase("seconds"); };
    expect = "has no valid seconds";
  }
  SUBCASE("negative seconds") {
    edit = [](json& j) { j["seconds"] = -1; };
    expect = "has no valid seconds";
  }
  SUBCASE("records not a list") {
    edit = [](json& j) { j["records"] = json::object(); };
    expect = "has no records";
  }
  SUBCASE("iteration out of sequence") {
    edit = [](json& j) { j["records"][2]["i"] = 3; };
    expect = "record 2: out of sequence";
  }
  SUBCASE("node out of sequence") {
    edit = [](json& j) { j["records"][1]["node"] = 1; };
    expect = "record 1: out of sequence";
  }
  SUBCASE("missing record") {
    edit = [](json& j) { j["records"].erase(1); };
    expect = "record 1: out of sequence";
  }
  SUBCASE("parent not earlier") {
    edit = [](json& j) { j["records"][1]["parent"] = 2; };
    expect = "record 1: parent is not an earlier node";
  }
  SUBCASE("negative parent") {
    edit = [](json& j) { j["records"][1]["parent"] = -1; };
    expect = "record 1: parent is not an earlier node";
  }
  SUBCASE("action without kind") {
    edit = [](json& j) { j["records"][0]["action"].erase("kind"); };
    expect = "record 0: action has no kind";
  }
  SUBCASE("unknown status") {
    edit = [](json& j) { j["records"][0]["outcome"]["status"] = "fast"; };
    expect = "record 0: outcome has no known status";
  }
  SUBCASE("verified without speedup") {
    edit = [](json& j) {
      j["records"][0]["outcome"] = {{"status", "ok"}, {"steps", json::object()}};
    };
    expect = "record 0: verified outcome without a finite speedup > 0";
  }
  SUBCASE("zero speedup") {
    edit = [](json& j) {
      j["records"][0]["outcome"] = {
          {"status", "slower"}, {"speedup", 0}, {"steps", json::object()}};
    };
    expect = "record 0: verified outcome without a finite speedup > 0";
  }
  SUBCASE("failure with a speedup") {
    edit = [](json& j) {
      j["records"][0]["outcome"] = {{"status", "crash"}, {"speedup", 2}, {"steps", json::object()}};
    };
    expect = "record 0: failed outcome with a speedup";
  }
  SUBCASE("step not a string") {
    edit = [](json& j) { j["records"][0]["outcome"]["steps"]["compile"] = 3; };
    expect = "record 0: step 'compile' is not a string";
  }
  SUBCASE("huge iteration") {
    edit = [](json& j) { j["records"][0]["i"] = 1ULL << 40; };
    expect = "record 0: out of sequence";
  }
  json bad = good;
  edit(bad);
  auto warnings = load_warnings(bad.dump());
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0] == "search journal '" + kRef + "' " + expect + "; starting over");
}

TEST_CASE("a journal that parses but cannot be replayed starts over") {
  auto store = store::make_memory_store();
  json j = json::parse(search(*store, 4).text);
  // Records 0 and 1 both under the root with the same action: one try recorded twice.
  j["records"][1]["parent"] = 0;
  j["records"][1]["action"] = j["records"][0]["action"];
  store->put_ref(kRef, j.dump());
  Outcomes redone = search(*store, 4);
  REQUIRE(redone.warnings.size() == 1);
  CHECK(redone.warnings[0].find("cannot be replayed (action ") != std::string::npos);
  CHECK(redone.calls == 4);
  CHECK(redone.result.iterations == 4);
}

TEST_CASE("another context or other search settings start over; the stale journal is replaced") {
  auto store = store::make_memory_store();
  const Outcomes h200 = search(*store, 6, 1, "h200");
  Outcomes b200 = search(*store, 6, 1, "b200");
  REQUIRE(b200.warnings.size() == 1);
  CHECK(b200.warnings[0] == "search journal '" + kRef +
                                "' was made for another target, device, toolchain or proposer; "
                                "starting over");
  CHECK(b200.calls == 6);
  CHECK(json::parse(*store->get_ref(kRef))["context"] == "b200");

  std::vector<std::string> warnings;
  SearchParams other;
  other.seed = 99;
  Journal journal(*store, kRef, "b200", other.to_json(),
                  [&](const std::string& w) { warnings.push_back(w); });
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].find("other search settings") != std::string::npos);
  // The driver refuses a journal opened for other settings than the search's.
  Proposer3 proposer;
  Evaluator3 evaluator;
  Tree tree;
  Search s(tree, proposer);
  CHECK_THROWS_AS(run_search(s, evaluator, budget(3), journal), std::invalid_argument);
}

TEST_CASE("a journal written with one parallelism continues under another") {
  auto store = store::make_memory_store();
  search(*store, 9, 3);
  Proposer3 proposer;
  Evaluator3 evaluator;
  Tree tree;
  Search s(tree, proposer);
  Journal journal(*store, kRef, "ctx", s.params().to_json(), nullptr);
  SearchResult r = run_search(s, evaluator, budget(15, 1), journal);
  CHECK(r.replayed == 9);
  CHECK(evaluator.calls == 6);
  CHECK(tree.completed() == 15);
  CHECK(tree.node(kRoot).visits == 15);
  CHECK(journal.records().size() == 15);
}

TEST_SUITE_END();

}  // namespace forge::mcts
