// The whole CPU loop for real: capture an unmodified script, search its
// layer_norm and softmax targets with the strategy library, verify and time
// every candidate in the worker, accept what is faster. Skipped (visibly)
// where torch is not importable.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "tests/support.h"

namespace forge {
namespace fs = std::filesystem;
using nlohmann::json;

TEST_SUITE_BEGIN("rules::SearchTorch");

// Acceptance is a measurement, so it is made robust rather than assumed: the
// CPU stock kernel is timed on one thread like the candidate (rules/evaluate/evaluate.cpp),
// `faster` pairs candidate and stock round by round, so other tests' load
// hits both, and layer_norm on [4,128,64] wins 3.3-6x per core (docs/STRATEGIES.md). Outcomes by kind are
// printed when it fails, so a red CI says why.
TEST_CASE("the example's targets are searched, a candidate is accepted, and the tree is incremental") {
  const fs::path repo = fs::path(FORGE_TEST_DIR).parent_path();
  FORGE_SKIP_WITHOUT_TORCH();
  test::TempDir dir;
  fs::copy_file(repo / "examples" / "tiny" / "transformer.py", dir / "transformer.py");
  test::write_text(dir / "forge.yaml",
                   "models:\n  transformer: {run: python transformer.py, check_runs: 1}\n"
                   "targets: {ops: [native_layer_norm, _softmax], top: 0, min_share: 0, chains: 0}\n"
                   "budget: {iterations: 2}\n");

  auto first = test::run_forge("--json build", dir.path());
  INFO(first.err);
  REQUIRE(first.exit_code == 0);
  json r = json::parse(first.out);
  REQUIRE(r["targets"].size() >= 2);
  int accepted = 0;
  for (const auto& t : r["targets"]) {
    CHECK(t["iterations"] == 2);
    CHECK_MESSAGE(t["verified"].get<int>() >= 1, "no candidate verified: " << t.dump());
    CHECK(t["accepted"].get<int>() <= t["verified"].get<int>());
    accepted += t["accepted"].get<int>();
    CHECK(t["tree_depth"].get<int>() >= 1);
    CHECK(t["tree_depth"].get<int>() <= 2);  // two iterations: one or two levels
    if (t["accepted"].get<int>() > 0) {
      CHECK(t["best_speedup_eager"].get<double>() > 1.0);
      CHECK(t["best_strategy"].is_string());
      CHECK(t["best_iteration"].get<int>() >= 1);
      CHECK(t["best_iteration"].get<int>() <= 2);
    } else {
      CHECK(t["best_iteration"].is_null());
    }
  }
  CHECK_MESSAGE(accepted >= 1, "no candidate was accepted: " << r["targets"].dump());
  // targets.chains: 0 leaves the attention scores' chain (div, _softmax),
  // which the library fuses, unsearched, and says so.
  bool capped = false;
  for (const auto& c : r["chains"])
    if (c["ops"] == json::array({"div.Tensor", "_softmax"})) {
      capped = true;
      CHECK(c["searched"] == false);
      CHECK(c["why"] == "not searched: beyond forge.yaml's targets.chains (0)");
    }
  CHECK_MESSAGE(capped, r["chains"].dump());
  // This build's own search time, per target (candidates per minute).
  for (const auto& t : r["targets"]) {
    const json& run = r["search"][t["id"].get<std::string>()];
    CHECK(run["evaluations"] == 2);
    CHECK(run["seconds"].get<double>() > 0);
  }

  auto again = test::run_forge("--json build", dir.path());
  REQUIRE(again.exit_code == 0);
  json r2 = json::parse(again.out);
  CHECK(r2["steps_run"] == 0);
  CHECK(r2["targets"] == r["targets"]);
  CHECK(r2["search"].is_null());  // the journal replayed, nothing evaluated

  // One more iteration per target: at most one compile and one evaluation each
  // (a candidate the static check rejects runs neither). What depends on the
  // accepted set may follow, and only when the new candidate was accepted: a
  // target's first torch.compile baseline, and the model's end-to-end check of
  // a changed package. Capture and the earlier iterations never rerun.
  auto more = test::run_forge("--json build --budget 3", dir.path());
  REQUIRE(more.exit_code == 0);
  json r3 = json::parse(more.out);
  const int targets = static_cast<int>(r3["targets"].size());
  int newly_accepted = 0;
  for (size_t i = 0; i < r3["targets"].size(); ++i) {
    CHECK(r3["targets"][i]["iterations"] == 3);
    newly_accepted += r3["targets"][i]["accepted"].get<int>() - r["targets"][i]["accepted"].get<int>();
  }
  for (const auto& t : r3["targets"])
    CHECK(r3["search"][t["id"].get<std::string>()]["evaluations"] == 1);
  CHECK(r3["steps_run"].get<int>() >= 1);
  CHECK(r3["steps_run"].get<int>() <= 2 * targets + 2 * newly_accepted);
}

// budget.parallel > 1: while the worker evaluates a candidate, the next ones
// the proposer lists compile in the background (rules/search/search.cpp,
// compile_ahead); when the search reaches them their compile is a cache hit.
// Evaluations stay serial and the journal is the same kind of tree.
TEST_CASE("budget.parallel compiles the next candidates ahead; the search takes them from the cache") {
  const fs::path repo = fs::path(FORGE_TEST_DIR).parent_path();
  FORGE_SKIP_WITHOUT_TORCH();
  test::TempDir dir;
  fs::copy_file(repo / "examples" / "tiny" / "transformer.py", dir / "transformer.py");
  test::write_text(dir / "forge.yaml",
                   "models:\n  transformer: {run: python transformer.py, check_runs: 1}\n"
                   "targets: {ops: [native_layer_norm], top: 0, min_share: 0, chains: 0}\n"
                   "budget: {iterations: 4, parallel: 3}\n");
  auto build = test::run_forge("--json build", dir.path());
  INFO(build.err);
  REQUIRE(build.exit_code == 0);
  json r = json::parse(build.out);
  REQUIRE(r["targets"].size() == 1);
  CHECK(r["targets"][0]["iterations"] == 4);
  // The search's wall clock, the part of it spent waiting on compiles (the
  // first candidate's at least: nothing was ahead of it), and how many
  // evaluations found their candidate compiled ahead.
  const json& wall = r["search"][r["targets"][0]["id"].get<std::string>()];
  CHECK(wall["compile_wait_seconds"].get<double>() > 0);
  CHECK(wall["compile_wait_seconds"].get<double>() <= wall["seconds"].get<double>());
  CHECK(wall["compiled_ahead"].get<int>() >= 1);
  CHECK(wall["compiled_ahead"].get<int>() <= 3);
  CHECK(wall["exhausted"] == false);  // the budget stopped it, not a lack of actions

  // The evaluation records (store objects: a 20-byte header, then JSON) of
  // the layer norm: each evaluation's own compile ran before it, so each reads "cached".
  int evaluated = 0, cached = 0;
  for (const auto& f : fs::recursive_directory_iterator(dir / ".forge" / "objects")) {
    if (!f.is_regular_file()) continue;
    const std::string text = test::read_text(f.path());
    if (text.size() < 20) continue;
    json rec = json::parse(text.substr(20), nullptr, false);
    if (!rec.is_object() || !rec.contains("candidate") || !rec.contains("compile")) continue;
    if (rec.value("target", "") != r["targets"][0]["id"].get<std::string>()) continue;
    ++evaluated;
    if (rec["compile"].value("cached", false)) ++cached;
  }
  CHECK(evaluated == 4);
  CHECK(cached == evaluated);

  // The guesses the search did not take were recorded when it ended: a raised
  // budget finds at least one compiled.
  auto more = test::run_forge("--json build --budget 6", dir.path());
  INFO(more.err);
  REQUIRE(more.exit_code == 0);
  json r2 = json::parse(more.out);
  const json& wall2 = r2["search"][r2["targets"][0]["id"].get<std::string>()];
  CHECK(wall2["evaluations"] == 2);
  CHECK(wall2["compiled_ahead"].get<int>() >= 1);
}

// Ctrl-C (here SIGINT from `timeout`) stops a build at the next step: the
// report of what exists is printed and the exit status is 130; nothing the
// interruption cut short is kept (journaled or cached as a failure), so the
// next build finishes the same searches with only real verdicts.
TEST_CASE("an interrupted build prints its report, exits 130, and the next build finishes it; budget.build_seconds stops it without interrupting") {
  const fs::path repo = fs::path(FORGE_TEST_DIR).parent_path();
  FORGE_SKIP_WITHOUT_TORCH();
  test::TempDir dir;
  fs::copy_file(repo / "examples" / "tiny" / "transformer.py", dir / "transformer.py");
  test::write_text(dir / "forge.yaml",
                   "models:\n  transformer: {run: python transformer.py, check_runs: 1}\n"
                   "targets: {ops: [native_layer_norm], top: 0, min_share: 0, chains: 0}\n"
                   "budget: {iterations: 1}\n");
  auto warm = test::run_forge("--json build", dir.path());  // capture, worker, baselines
  INFO(warm.err);
  REQUIRE(warm.exit_code == 0);

  // budget.build_seconds, run out before the search: no evaluation starts,
  // the target's journal is replayed (its kernel still reported and shipped),
  // it says why, and the build ends normally with its package stage.
  const json w = json::parse(warm.out);
  const std::string manifest = test::read_text(dir / "forge.yaml");
  test::write_text(dir / "forge.yaml", manifest.substr(0, manifest.find("budget:")) +
                                           "budget: {iterations: 1, build_seconds: 0.001}\n");
  auto late = test::run_forge("--json build --budget 3", dir.path());
  INFO(late.err);
  REQUIRE(late.exit_code == 0);
  json l = json::parse(late.out);
  CHECK(l["ok"] == true);
  CHECK(l["interrupted"] == false);
  CHECK(l["steps_run"] == 0);  // nothing evaluated, the package unchanged
  CHECK(l["notes"].dump().find("budget.build_seconds (0.001 s) ran out") != std::string::npos);
  REQUIRE(l["targets"].size() == 1);
  CHECK(l["targets"][0]["why"].get<std::string>().find("budget.build_seconds (0.001 s) ran out before its search") == 0);
  CHECK(l["targets"][0]["iterations"] == w["targets"][0]["iterations"]);
  CHECK(l["targets"][0]["accepted"] == w["targets"][0]["accepted"]);
  REQUIRE(l["package"].is_object());
  CHECK(l["package"]["status"] == w["package"]["status"]);
  CHECK(l["package"]["entries"] == w["package"]["entries"]);
  if (w["targets"][0]["accepted"].get<int>() > 0) CHECK(l["package"]["entries"].get<int>() >= 1);
  test::write_text(dir / "forge.yaml", manifest);

  auto cut = test::run_forge("--json build --budget 4", dir.path(), "timeout --preserve-status -s INT 4");
  INFO(cut.err);
  CHECK(cut.exit_code == 130);
  json r = json::parse(cut.out);
  CHECK(r["interrupted"] == true);
  CHECK(r["ok"] == false);

  auto done = test::run_forge("--json build --budget 4", dir.path());
  INFO(done.err);
  REQUIRE(done.exit_code == 0);
  json d = json::parse(done.out);
  CHECK(d["interrupted"] == false);
  for (const auto& t : d["targets"]) {
    INFO(t["id"].get<std::string>() << " outcomes " << t["outcomes"].dump()
                                    << " rejections " << t["rejections"].dump());
    int counted = 0;
    for (const auto& [kind, n] : t["outcomes"].items()) {
      CHECK((kind == "ok" || kind == "not_faster"));  // every CPU instance verifies
      counted += n.get<int>();
    }
    CHECK(counted == t["iterations"].get<int>());
  }
}

TEST_SUITE_END();
}  // namespace forge
