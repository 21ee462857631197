// Replaying history: reading kernels and per-target commits back from a real
// temporary repository, the bisection and the "changed" rule, and end to end on
// the CPU with torch (`forge replay`, `forge bisect`; skipped visibly without
// torch).
#include <doctest/doctest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "rules/history_replay.h"
#include "tests/support.h"
#include "util/error.h"

namespace forge {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const char* kRef = "refs/heads/forge/kernels";
const GitAuthor kAuthor{"Ann", "ann@example.com", 1700000000};

std::string sh_out(const std::string& cmd) {
  std::string out;
  FILE* p = popen((cmd + " 2>/dev/null").c_str(), "r");
  REQUIRE(p);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

std::string git(const fs::path& dir, const std::string& args) {
  return sh_out("git -C '" + dir.string() + "' -c user.name=T -c user.email=t@t " + args);
}

HistoryEntry entry(const std::string& target, const std::string& file, const std::string& source,
                   double median) {
  HistoryEntry e;
  e.target = target;
  e.file = file;
  e.source = source;
  e.result = {{"target", target},
              {"speedup_eager", 2.0},
              {"candidate_us", {{"median", median}, {"spread", 0.5}}}};
  e.summary = "2.00x over eager (hand {})";
  e.fields = {{"kernel", file}, {"proposer", "hand"}};
  return e;
}

}  // namespace

TEST_SUITE_BEGIN("rules::HistoryReplay");

TEST_CASE("first_true bisects a monotone predicate, testing few indices") {
  for (size_t n : {0u, 1u, 2u, 5u, 16u, 17u})
    for (size_t answer = 0; answer <= n; ++answer) {
      std::vector<size_t> tested;
      size_t got = first_true(n, [&](size_t i) {
        tested.push_back(i);
        return i >= answer;
      });
      CHECK(got == answer);
      CHECK(tested.size() <= 6);
    }
}

TEST_CASE("timings change only beyond both spreads") {
  CHECK_FALSE(timing_changed({10, 1}, {11.5, 1}));
  CHECK(timing_changed({10, 1}, {12.5, 1}));
  CHECK(timing_changed({10, 0.5}, {8, 0.5}));
  CHECK_FALSE(timing_changed({10, 0}, {10, 0}));
}

TEST_CASE("rejected_on_case matches the case the worker names, whole") {
  json rec = {{"verdict", "rejected"},
              {"reason", "wrong_result"},
              {"detail",
               "max abs err 1 (rel 0.5) at index [0,0,0] on case sample 1: got 3, "
               "expected 2 (atol 1e-05, rtol 1e-05)"}};
  CHECK(rejected_on_case(rec, "sample 1"));
  CHECK_FALSE(rejected_on_case(rec, "sample 0"));
  rec["detail"] = "the candidate wrote outside output 0 (byte offset 4) on case sample 10";
  CHECK(rejected_on_case(rec, "sample 10"));
  CHECK_FALSE(rejected_on_case(rec, "sample 1"));
  rec["verdict"] = "accepted";
  CHECK_FALSE(rejected_on_case(rec, "sample 10"));
}

TEST_CASE("kernels_at, kernel_at and commits_changing read the branch back") {
  test::TempDir dir;
  git(dir.path(), "init -q");
  commit_history(dir.path(), kRef,
                 {entry("m/_softmax/abc123", "a.cpp", "int a;\n", 10),
                  entry("m/mean.dim/def456", "m.cpp", "int m;\n", 5),
                  entry("m/_softmax/abc123", "b.cpp", "int b;\n", 8)},
                 kAuthor);
  auto tip = kernels_at(dir.path(), "forge/kernels");
  REQUIRE(tip.size() == 2);
  CHECK(tip[0].target == "m/_softmax/abc123");
  CHECK(tip[0].file == "b.cpp");
  CHECK(tip[0].source == "int b;\n");
  CHECK(tip[0].result["candidate_us"]["median"] == 8);
  CHECK(tip[1].target == "m/mean.dim/def456");
  CHECK(kernels_at(dir.path(), "forge/kernels~2").size() == 1);
  CHECK_THROWS_WITH_AS(kernels_at(dir.path(), "nope"), doctest::Contains("unknown revision 'nope'"),
                       Error);

  auto at = kernel_at(dir.path(), "forge/kernels~1", "m/_softmax/abc123");
  REQUIRE(at);
  CHECK(at->file == "a.cpp");
  CHECK_FALSE(kernel_at(dir.path(), "forge/kernels~2", "m/mean.dim/def456"));

  auto soft = commits_changing(dir.path(), kRef, "m/_softmax/abc123");
  REQUIRE(soft.size() == 2);
  CHECK(soft[0].commit == git(dir.path(), "rev-parse forge/kernels~2"));
  CHECK(soft[1].commit == git(dir.path(), "rev-parse forge/kernels"));
  CHECK(soft[1].fields.at("kernel") == "b.cpp");
  auto mean = commits_changing(dir.path(), kRef, "m/mean.dim/def456");
  REQUIRE(mean.size() == 1);
  CHECK(mean[0].commit == git(dir.path(), "rev-parse forge/kernels~1"));
  CHECK(commits_changing(dir.path(), kRef, "m/x/000000").empty());
  CHECK(commits_changing(dir.path(), "refs/heads/none", "m/_softmax/abc123").empty());
  CHECK(resolve_commit(dir.path(), "forge/kernels").subject ==
        "forge: m/_softmax/abc123 2.00x over eager (hand {})");
}

// The whole loop on the CPU: build commits kernels; replay re-evaluates them
// (cached the second time); hand-written commits (a correct kernel, then a
// deliberately wrong one) give bisect something to find.
TEST_CASE("forge replay and forge bisect on a real build") {
  FORGE_SKIP_WITHOUT_TORCH();
  const fs::path src = fs::path(FORGE_TEST_DIR).parent_path();
  test::TempDir dir;
  git(dir.path(), "init -q -b main");
  fs::copy_file(src / "examples" / "tiny" / "transformer.py", dir / "transformer.py");
  test::write_text(dir / "forge.yaml",
                   "models:\n  transformer: {run: python transformer.py}\n"
                   "targets: {ops: [native_layer_norm], top: 0, min_share: 0}\n"
                   "budget: {iterations: 3}\n");
  auto build = test::run_forge("--json build", dir.path());
  INFO(build.err);
  REQUIRE(build.exit_code == 0);
  json report = json::parse(build.out);
  REQUIRE(report["targets"].size() == 1);
  const std::string target = report["targets"][0]["id"];
  const int searched = report["history"]["commits_added"].get<int>();

  if (searched > 0) {
    auto first = test::run_forge("replay", dir.path());
    INFO(first.out << first.err);
    CHECK(first.exit_code == 0);
    CHECK(first.out.find(target) != std::string::npos);
    CHECK(first.out.find("accepted (ok)") != std::string::npos);
    auto again = test::run_forge("--json replay forge/kernels " + target, dir.path());
    INFO(again.out << again.err);
    CHECK(again.exit_code == 0);
    json r = json::parse(again.out);
    REQUIRE(r["kernels"].size() == 1);
    CHECK(r["kernels"][0]["target"] == target);
    CHECK(r["kernels"][0]["status"] == "verified");
    CHECK(r["kernels"][0]["now"]["cached"] == true);
    CHECK(r["kernels"][0]["now"]["candidate_us"]["median"].is_number());
    CHECK(r["kernels"][0]["recorded"]["candidate_us"]["median"].is_number());
    CHECK(r["kernels"][0]["changed"].is_boolean());
  } else {
    MESSAGE("search accepted nothing on this machine: replay is checked on hand commits only");
  }

  // Two hand-written improvements: the library's two_pass kernel as is, then
  // the same with out[0] off by one.
  const std::string good = test::library_kernel("layer_norm", "two_pass");
  std::string bad = good;
  const std::string entry_line = "extern \"C\" int forge_kernel(const forge_call* call) {";
  REQUIRE(bad.find(entry_line) != std::string::npos);
  bad.replace(bad.find(entry_line), entry_line.size(),
              "static int correct_kernel(const forge_call* call) {");
  bad +=
      "\nextern \"C\" int forge_kernel(const forge_call* call) {\n"
      "  int rc = correct_kernel(call);\n"
      "  if (rc == 0) static_cast<float*>(call->outputs[0].data)[0] += 1.0f;\n"
      "  return rc;\n}\n";
  HistoryResult h = commit_history(
      dir.path(), kRef,
      {entry(target, "hand-good.cpp", good, 1.0), entry(target, "hand-bad.cpp", bad, 0.5)},
      kAuthor);
  REQUIRE(h.commits_added == 2);
  const std::string bad_sha = h.tip;

  auto fails =
      test::run_forge("bisect " + target.substr(0, 20) + " --fails-on 'sample 0'", dir.path());
  INFO(fails.out << fails.err);
  CHECK(fails.exit_code == 0);
  CHECK(fails.out.find("first commit rejected on case 'sample 0': " + bad_sha) !=
        std::string::npos);

  // The same through a tensor file in the sample format: float32[4,128,64] raw.
  {
    std::ofstream f(dir / "input.bin", std::ios::binary);
    for (int i = 0; i < 4 * 128 * 64; ++i) {
      float v = static_cast<float>((i * 7919) % 1000) / 250.0f - 2.0f;
      f.write(reinterpret_cast<const char*>(&v), sizeof v);
    }
  }
  auto on_file = test::run_forge("--json bisect " + target + " --fails-on input.bin", dir.path());
  INFO(on_file.out << on_file.err);
  CHECK(on_file.exit_code == 0);
  json b = json::parse(on_file.out);
  CHECK(b["found"]["commit"] == bad_sha);
  CHECK(b["commits"] == searched + 2);
  CHECK(b["tested"].back()["reason"] == "wrong_result");
  test::write_text(dir / "short.bin", "abc");
  CHECK(test::run_forge("bisect " + target + " --fails-on short.bin", dir.path()).exit_code == 2);

  auto slow = test::run_forge("bisect " + target + " --slower-than 1e9", dir.path());
  INFO(slow.out << slow.err);
  CHECK(slow.exit_code == 1);
  CHECK(slow.out.find("no commit of " + target + " is slower than 1e+09 µs") != std::string::npos);

  // The tip's kernel no longer verifies: replay says so and exits 1 (cached by now).
  auto tip = test::run_forge("--json replay", dir.path());
  INFO(tip.out << tip.err);
  CHECK(tip.exit_code == 1);
  json t = json::parse(tip.out);
  REQUIRE(t["kernels"].size() == 1);
  CHECK(t["kernels"][0]["kernel"] == "hand-bad.cpp");
  CHECK(t["kernels"][0]["status"] == "rejected");
  CHECK(t["kernels"][0]["now"]["cached"] == true);

  CHECK(test::run_forge("bisect " + target, dir.path()).exit_code == 2);
  CHECK(test::run_forge("replay a b c", dir.path()).exit_code == 2);
}

TEST_SUITE_END();
}  // namespace forge
