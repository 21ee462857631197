#include <doctest/doctest.h>

#include "engine/builder.h"
#include "store/store.h"
#include "util/interrupt.h"

namespace forge {
using nlohmann::json;

TEST_SUITE_BEGIN("engine::Builder");

namespace {
StepSpec counting_step(int* runs, std::string a = "1", std::string b = "2") {
  StepSpec s;
  s.kind = "compile";
  s.label = "m/op/abc123 #1";
  s.name = "compile/m/op";
  s.inputs = {{"source", a}, {"flags", b}};
  s.run = [runs] {
    ++*runs;
    return json{{"status", "ok"}, {"value", *runs}};
  };
  return s;
}
}  // namespace

TEST_CASE("a step runs once; an unchanged key is a cache hit") {
  auto store = store::make_memory_store();
  Progress progress(false);
  Builder b(*store, progress);
  int runs = 0;
  auto first = b.run(counting_step(&runs));
  auto second = b.run(counting_step(&runs));
  CHECK(runs == 1);
  CHECK_FALSE(first.cached);
  CHECK(second.cached);
  CHECK(second.record["value"] == 1);
  CHECK(b.steps_run() == 1);
  CHECK(b.steps_cached() == 1);
}

TEST_CASE("changing one input reruns; changing it back hits the old entry") {
  auto store = store::make_memory_store();
  Progress progress(false);
  Builder b(*store, progress);
  int runs = 0;
  b.run(counting_step(&runs, "1"));
  b.run(counting_step(&runs, "changed"));
  CHECK(runs == 2);
  b.run(counting_step(&runs, "1"));
  CHECK(runs == 2);
}

TEST_CASE("keep: another step's record kept under a broader key is a cache hit there, and runs nothing") {
  auto store = store::make_memory_store();
  Progress progress(false);
  Builder b(*store, progress);
  int runs = 0;
  auto ran = b.run(counting_step(&runs, "1"));
  StepSpec broad = counting_step(&runs, "any");
  CHECK_FALSE(b.lookup(broad));
  b.keep(broad, ran.record);
  CHECK(runs == 1);
  CHECK(b.steps_run() == 1);
  auto hit = b.run(broad);
  CHECK(hit.cached);
  CHECK(hit.record["value"] == 1);
  CHECK(runs == 1);
}

TEST_CASE("keys are typed: moving bytes between inputs changes the key") {
  int runs = 0;
  StepSpec a = counting_step(&runs, "-I", "-O2");
  StepSpec b = counting_step(&runs, "-I-O2", "");
  CHECK(step_key(a) != step_key(b));
  StepSpec c = a;
  c.version = 2;
  CHECK(step_key(a) != step_key(c));
}

TEST_CASE("failures are not cached unless the step says they are deterministic") {
  auto store = store::make_memory_store();
  Progress progress(false);
  Builder b(*store, progress);
  int runs = 0;
  StepSpec s = counting_step(&runs);
  s.run = [&runs] {
    ++runs;
    return failed_record("compile error");
  };
  b.run(s);
  b.run(s);
  CHECK(runs == 2);
  CHECK(b.steps_failed() == 2);
  s.cache_failures = true;
  b.run(s);
  auto again = b.run(s);
  CHECK(runs == 3);
  CHECK(again.cached);
  CHECK(again.record["reason"] == "compile error");
}

TEST_CASE("interrupted: a step that fails meanwhile is not kept, one that finishes is, none starts") {
  auto store = store::make_memory_store();
  Progress progress(false);
  Builder b(*store, progress);
  int runs = 0;
  StepSpec cut = counting_step(&runs, "cut");
  cut.cache_failures = true;  // even a deterministic failure: the interruption caused it
  cut.run = [&runs] {
    ++runs;
    set_interrupted(true);  // Ctrl-C while the step's command ran; the command was stopped
    return failed_record("exit code 143");
  };
  auto r = b.run(cut);
  CHECK(r.record["reason"] == "interrupted");
  CHECK_FALSE(store->get_action(step_key(cut)));
  StepSpec done = counting_step(&runs, "done");
  done.run = [&runs] {
    ++runs;
    set_interrupted(true);  // the signal came, but the step finished
    return json{{"status", "ok"}, {"value", runs}};
  };
  set_interrupted(false);
  b.run(done);
  CHECK(store->get_action(step_key(done)));  // a result: kept
  int later = 0;
  auto skipped = b.run(counting_step(&later, "later"));
  CHECK(later == 0);
  CHECK(skipped.record["reason"] == "interrupted");
  set_interrupted(false);
  CHECK(b.run(counting_step(&later, "later")).record["status"] == "ok");  // the next build runs it
  CHECK(later == 1);
}

TEST_CASE("an exception inside a step becomes a failed record, not a crash") {
  auto store = store::make_memory_store();
  Progress progress(false);
  Builder b(*store, progress);
  StepSpec s;
  s.kind = "verify";
  s.run = []() -> json { throw std::runtime_error("worker died"); };
  auto out = b.run(s);
  CHECK_FALSE(record_ok(out.record));
  CHECK(out.record["reason"] == "worker died");
}

TEST_CASE("validate() rejecting a cached record reruns the step") {
  auto store = store::make_memory_store();
  Progress progress(false);
  Builder b(*store, progress);
  int runs = 0;
  bool outputs_exist = true;
  StepSpec s = counting_step(&runs);
  s.validate = [&](const json&) { return outputs_exist; };
  b.run(s);
  b.run(s);
  CHECK(runs == 1);
  outputs_exist = false;
  b.run(s);
  CHECK(runs == 2);
}

TEST_CASE("explain names the input that changed") {
  auto store = store::make_memory_store();
  Progress progress(false);
  Builder b(*store, progress);
  int runs = 0;
  SUBCASE("never ran") {
    auto e = b.explain(counting_step(&runs));
    CHECK_FALSE(e.up_to_date);
    REQUIRE(e.reasons.size() == 1);
    CHECK(e.reasons[0] == "compile has never run");
  }
  SUBCASE("up to date") {
    b.run(counting_step(&runs));
    CHECK(b.explain(counting_step(&runs)).up_to_date);
  }
  SUBCASE("one input changed") {
    b.run(counting_step(&runs, "1", "-O2"));
    auto e = b.explain(counting_step(&runs, "1", "-O3"));
    CHECK_FALSE(e.up_to_date);
    REQUIRE(e.reasons.size() == 1);
    CHECK(e.reasons[0] == "input 'flags' changed (-O2 -> -O3)");
  }
  SUBCASE("inputs added and removed") {
    b.run(counting_step(&runs));
    StepSpec s = counting_step(&runs);
    s.inputs = {{"source", "1"}, {"arch", "sm_90a"}};
    auto e = b.explain(s);
    CHECK(e.reasons == std::vector<std::string>{"input 'arch' is new", "input 'flags' was removed"});
  }
}

TEST_SUITE_END();
}  // namespace forge
