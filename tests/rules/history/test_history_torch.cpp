// History end to end on the CPU with torch (skipped visibly without it): a real
// `forge build` commits accepted kernels to forge/kernels and a rebuild adds
// nothing; `forge replay` re-evaluates the kernels and `forge bisect` finds a
// hand-committed wrong one. The torch tier (CMakeLists.txt); what needs no
// torch is in test_history.cpp and test_replay.cpp.
#include <doctest/doctest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "rules/history/history.h"
#include "rules/history/replay.h"
#include "tests/support.h"

namespace forge {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const char* kRef = "refs/heads/forge/kernels";
const GitAuthor kAuthor{"Ann", "ann@example.com", 1700000000};

struct Shell {
  int rc = -1;
  std::string out;
};

// Runs a shell command; stdout captured, stderr discarded.
Shell sh(const std::string& cmd) {
  Shell r;
  FILE* p = popen((cmd + " 2>/dev/null").c_str(), "r");
  REQUIRE(p);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int status = pclose(p);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string git(const fs::path& dir, const std::string& args) {
  return trim(sh("git -C '" + dir.string() + "' -c user.name=T -c user.email=t@t " + args).out);
}

// A hand-written improvement of `target`, as the search would record it.
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

TEST_SUITE_BEGIN("rules::HistoryTorch");

// The whole loop: search accepts, history commits, a rebuild adds nothing.
TEST_CASE("forge build commits accepted kernels to forge/kernels in the project's repository") {
  const fs::path repo = fs::path(FORGE_TEST_DIR).parent_path();
  FORGE_SKIP_WITHOUT_TORCH();
  test::TempDir dir;
  git(dir.path(), "init -q -b main");
  fs::copy_file(repo / "examples" / "tiny" / "transformer.py", dir / "transformer.py");
  test::write_text(dir / "forge.yaml",
                   "models:\n  transformer: {run: python transformer.py, check_runs: 1}\n"
                   "targets: {ops: [native_layer_norm], top: 0, min_share: 0, chains: 0}\n"
                   "budget: {iterations: 2}\n");
  auto first = test::run_forge("--json build", dir.path());
  INFO(first.err);
  REQUIRE(first.exit_code == 0);
  json r = json::parse(first.out);
  int accepted = 0;
  for (const auto& t : r["targets"]) accepted += t["accepted"].get<int>();
  REQUIRE(r["history"].is_object());
  CHECK(r["history"]["ref"] == "refs/heads/forge/kernels");
  const int commits =
      std::stoi(trim(git(dir.path(), "rev-list --count forge/kernels 2>/dev/null || echo 0")));
  CHECK(commits == r["history"]["commits_added"].get<int>());
  if (accepted == 0) {
    MESSAGE("nothing was accepted on this machine, so nothing was committed: " << r["targets"]);
    CHECK(commits == 0);
    return;
  }
  CHECK(commits >= 1);
  CHECK(sh("git -C '" + dir.path().string() + "' rev-parse --verify -q HEAD").rc != 0);
  CHECK(git(dir.path(), "ls-tree -r --name-only forge/kernels").find("/result.json") !=
        std::string::npos);

  auto again = test::run_forge("--json build", dir.path());
  REQUIRE(again.exit_code == 0);
  json r2 = json::parse(again.out);
  CHECK(r2["history"]["commits_added"] == 0);
  CHECK(r2["history"]["tip"] == r["history"]["tip"]);
  auto log = test::run_forge("log", dir.path());
  CHECK(log.out.find("transformer/native_layer_norm/") != std::string::npos);
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
                   "models:\n  transformer: {run: python transformer.py, check_runs: 1}\n"
                   "targets: {ops: [native_layer_norm], top: 0, min_share: 0, chains: 0}\n"
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
