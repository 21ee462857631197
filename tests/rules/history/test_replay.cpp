// Replaying history: reading kernels and per-target commits back from a real
// temporary repository, and the bisection and the "changed" rule (end to end on
// the CPU with torch, `forge replay` and `forge bisect`: test_history_torch.cpp).
#include <doctest/doctest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "rules/history/replay.h"
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

TEST_SUITE_END();
}  // namespace forge
