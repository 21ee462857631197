// History: improvement chains, commits to a ref of their own in real temporary
// repositories (checked with libgit2 and with the git command), the log/diff
// commands (the end-to-end `forge build` with torch: test_history_torch.cpp).
#include <doctest/doctest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "rules/history/history.h"
#include "rules/history/repo.h"
#include "rules/improvement.h"
#include "store/local_store.h"
#include "tests/support.h"
#include "util/error.h"

namespace forge {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

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

std::string git(const fs::path& dir, const std::string& args) {
  return sh("git -C '" + dir.string() + "' -c user.name=T -c user.email=t@t " + args).out;
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

HistoryEntry entry(const std::string& target, const std::string& file, const std::string& source,
                   double speedup) {
  HistoryEntry e;
  e.target = target;
  e.file = file;
  e.source = source;
  e.result = {{"target", target}, {"speedup_eager", speedup}};
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", speedup);
  e.summary = std::string(buf) + "x over eager (s {})";
  e.fields = {{"speedup_eager", buf}, {"proposer", "strategy:s {}"}, {"iteration", "1"}};
  return e;
}

const GitAuthor kAuthor{"Ann", "ann@example.com", 1700000000};

std::vector<HistoryEntry> two_targets() {
  return {entry("m/_softmax/abc123", "rows-A.cpp", "int a;\n", 1.5),
          entry("m/_softmax/abc123", "rows-B.cpp", "int b;\n", 2.0),
          entry("m/mean.dim/def456", "mean-A.cpp", "int c;\n", 1.2)};
}

// A repository with one commit on main, a modified tracked file, a staged file
// and an untracked one: what must survive untouched.
void make_busy_repo(const fs::path& dir) {
  git(dir, "init -q -b main");
  test::write_text(dir / "tracked.txt", "one\n");
  git(dir, "add tracked.txt");
  git(dir, "commit -q -m first");
  test::write_text(dir / "tracked.txt", "two\n");
  test::write_text(dir / "staged.txt", "s\n");
  git(dir, "add staged.txt");
  test::write_text(dir / "untracked.txt", "u\n");
}

}  // namespace

TEST_SUITE_BEGIN("rules::History");

namespace {
std::vector<ChainEntry> unraced(std::initializer_list<BenchTime> times) {
  std::vector<ChainEntry> out;
  for (const BenchTime& t : times) out.push_back({"e" + std::to_string(out.size()), t, json()});
  return out;
}
}  // namespace

TEST_CASE("without race records, the chain keeps a kernel only when it beats the tip by both spreads") {
  CHECK(improvement_chain({}).empty());
  CHECK(improvement_chain(unraced({{10, 1}})) == std::vector<size_t>{0});
  // 9 vs 10 with spreads 1 + 1: inside the noise.
  CHECK(improvement_chain(unraced({{10, 1}, {9, 1}})) == std::vector<size_t>{0});
  CHECK(improvement_chain(unraced({{10, 1}, {7.9, 0.1}, {7.5, 0.5}, {6, 0.1}})) == std::vector<size_t>{0, 1, 3});
  // Slower later kernels never replace the best.
  CHECK(improvement_chain(unraced({{5, 0}, {8, 0}, {4, 0}})) == std::vector<size_t>{0, 2});
}

TEST_CASE("a race against the tip decides, whatever the spreads say") {
  // Spreads so wide that the old rule keeps nothing after the first kernel.
  auto k = unraced({{100, 40}, {80, 40}, {70, 40}, {60, 40}});
  k[1].race = {{"tip", "e0"}, {"challenger_wins", true}};
  k[2].race = {{"tip", "e1"}, {"challenger_wins", false}};  // lost: stays out
  k[3].race = {{"tip", "e1"}, {"challenger_wins", true}};
  CHECK(improvement_chain(k) == std::vector<size_t>{0, 1, 3});
  // A race won against another kernel than the tip of its time does not count:
  // the old rule decides (and here keeps it out).
  k[1].race = {{"tip", "e2"}, {"challenger_wins", true}};
  CHECK(improvement_chain(k) == std::vector<size_t>{0});
}

TEST_CASE("the race's fixed-size test: 1.2x faster ships on noisy rounds, noise and tiny gains do not") {
  const RaceRule rule;  // 5% minimum effect, alpha 0.05 (the rounds are the vectors' sizes here)
  // Ratios (kernel / stock per evaluation) with +-8% noise, the challenger 1.2x faster.
  const std::vector<double> tip{0.50, 0.46, 0.54, 0.49};
  const std::vector<double> fast{0.42, 0.38, 0.45, 0.40};
  RaceDecision d = decide_race(tip, fast, rule);
  INFO(d.why);
  CHECK(d.challenger_wins);
  CHECK(d.u == 0);
  CHECK(d.p == doctest::Approx(1.0 / 70));  // one ordering of C(8, 4)
  CHECK(d.effect == doctest::Approx(1 - 0.41 / 0.495));
  // The same kernel twice (the two samples interleave): no win.
  d = decide_race(tip, {0.47, 0.52, 0.48, 0.53}, rule);
  CHECK_FALSE(d.challenger_wins);
  CHECK(d.p > 0.2);
  // Separated, so significant, but 2% faster: below the minimum effect.
  d = decide_race({0.500, 0.501, 0.502, 0.503}, {0.490, 0.491, 0.492, 0.493}, rule);
  CHECK(d.p < 0.05);
  CHECK_FALSE(d.challenger_wins);
  // One pair of 16 out of order: p = 2/70, still a win; three: p = 7/70 > 0.05, not.
  CHECK(decide_race(tip, {0.42, 0.38, 0.47, 0.40}, rule).p == doctest::Approx(2.0 / 70));
  CHECK(decide_race(tip, {0.42, 0.38, 0.47, 0.40}, rule).challenger_wins);
  CHECK(decide_race(tip, {0.42, 0.38, 0.47, 0.495}, rule).p == doctest::Approx(7.0 / 70));
  CHECK_FALSE(decide_race(tip, {0.42, 0.38, 0.47, 0.495}, rule).challenger_wins);
  // A slower challenger never wins; no rounds, no decision.
  CHECK_FALSE(decide_race(fast, tip, rule).challenger_wins);
  CHECK_FALSE(decide_race({}, fast, rule).challenger_wins);
}

TEST_CASE("the race's verdict rate on simulated noisy machines: 1.2x ships nearly always, equal kernels rarely") {
  // A fake clock: each evaluation's ratio = true ratio x lognormal noise of
  // 10% (a loaded 2-core VM's spread between evaluations), seeded.
  std::mt19937_64 rng(7);
  std::normal_distribution<double> noise(0.0, 0.10);
  auto rounds = [&](double ratio) {
    std::vector<double> v;
    for (int i = 0; i < RaceRule{}.rounds; ++i) v.push_back(ratio * std::exp(noise(rng)));
    return v;
  };
  int wins_faster = 0, wins_equal = 0;
  const int trials = 2000;
  for (int i = 0; i < trials; ++i) {
    wins_faster += decide_race(rounds(0.5), rounds(0.5 / 1.2), RaceRule{}).challenger_wins;
    wins_equal += decide_race(rounds(0.5), rounds(0.5), RaceRule{}).challenger_wins;
  }
  MESSAGE("1.2x faster shipped " << wins_faster << "/" << trials << ", equal shipped " << wins_equal << "/" << trials);
  CHECK(wins_faster > 0.75 * trials);
  CHECK(wins_equal < 0.05 * trials);
}

TEST_CASE("a target ships, reports and is compared by the tip of its chain, not a later kernel within the noise") {
  test::TempDir dir;
  store::LocalStore store(dir / ".forge", nullptr);
  Target t;
  // Iteration order: 10 us, 7 us (beats 10 by both spreads), 6.8 us (faster,
  // but within 7's spread: not an improvement).
  for (auto [median, spread] : {std::pair{10.0, 0.2}, {7.0, 0.3}, {6.8, 0.3}}) {
    KernelRecord k;
    k.node = static_cast<int>(t.kernels.size()) + 1;
    k.evaluation = store.put_object(json{{"bench", {{"candidate_us", {{"median", median}, {"spread", spread}}}}}}.dump());
    t.kernels.push_back(k);
  }
  std::vector<json> records;
  auto i = shipped_kernel_index(store, t, &records);
  REQUIRE(i);
  CHECK(*i == 1);
  CHECK(records.size() == 3);
  CHECK(records[*i]["bench"]["candidate_us"]["median"] == 7.0);
  // A record missing from the store: nothing ships.
  t.kernels[2].evaluation = std::string(64, '0');
  CHECK_FALSE(shipped_kernel_index(store, t, &records));
  CHECK_FALSE(shipped_kernel_index(store, Target{}, &records));
}

TEST_CASE("commits go to the history ref only: working tree, index and HEAD stay as they were") {
  test::TempDir dir;
  make_busy_repo(dir.path());
  const std::string status = git(dir.path(), "status --porcelain");
  const std::string head = git(dir.path(), "rev-parse HEAD");
  const std::string index = test::read_text(dir / ".git" / "index");

  fs::create_directories(dir / "sub");  // a folder in the working tree names its repository
  HistoryResult r = commit_history(dir / "sub", "refs/heads/forge/kernels", two_targets(), kAuthor);
  CHECK(r.commits_added == 3);
  CHECK(r.ref == "refs/heads/forge/kernels");
  CHECK(fs::equivalent(r.repo, dir / ".git"));
  CHECK(r.tip == trim(git(dir.path(), "rev-parse forge/kernels")));

  CHECK(git(dir.path(), "status --porcelain") == status);
  CHECK(git(dir.path(), "rev-parse HEAD") == head);
  CHECK(git(dir.path(), "symbolic-ref HEAD") == "refs/heads/main\n");
  CHECK(test::read_text(dir / ".git" / "index") == index);
  CHECK(test::read_text(dir / "tracked.txt") == "two\n");

  // One commit per improvement, in order, with readable messages.
  CHECK(git(dir.path(), "log --format=%s forge/kernels") ==
        "forge: m/mean.dim/def456 1.20x over eager (s {})\n"
        "forge: m/_softmax/abc123 2.00x over eager (s {})\n"
        "forge: m/_softmax/abc123 1.50x over eager (s {})\n");
  CHECK(git(dir.path(), "log -1 --format=%an%n%ae%n%at%n%b forge/kernels") ==
        "Ann\nann@example.com\n1700000000\n"
        "target: m/mean.dim/def456\nspeedup_eager: 1.20\nproposer: strategy:s {}\n"
        "iteration: 1\n"
        "source: 2a04186289e43353c1383f02adc21006fd206e6247088490ee085794917fb2ff\n\n");
  // The tip is the whole current set: the best kernel of every target.
  CHECK(git(dir.path(), "ls-tree -r --name-only forge/kernels") ==
        "kernels/m/_softmax/abc123/result.json\n"
        "kernels/m/_softmax/abc123/rows-B.cpp\n"
        "kernels/m/mean.dim/def456/mean-A.cpp\n"
        "kernels/m/mean.dim/def456/result.json\n");
  CHECK(git(dir.path(), "show forge/kernels:kernels/m/_softmax/abc123/rows-B.cpp") == "int b;\n");
  CHECK(json::parse(git(dir.path(), "show forge/kernels:kernels/m/_softmax/abc123/result.json")) ==
        json{{"target", "m/_softmax/abc123"}, {"speedup_eager", 2.0}});
  CHECK(git(dir.path(), "ls-tree -r --name-only forge/kernels~2") ==
        "kernels/m/_softmax/abc123/result.json\nkernels/m/_softmax/abc123/rows-A.cpp\n");
  CHECK(sh("git -C '" + dir.path().string() + "' fsck --strict").rc == 0);
}

TEST_CASE("committing the same improvements again adds nothing; a new one adds one commit") {
  test::TempDir dir;
  git(dir.path(), "init -q");
  auto entries = two_targets();
  HistoryResult first = commit_history(dir.path(), "refs/heads/forge/kernels", entries, kAuthor);
  HistoryResult again = commit_history(dir.path(), "refs/heads/forge/kernels", entries, kAuthor);
  CHECK(again.commits_added == 0);
  CHECK(again.tip == first.tip);

  entries.push_back(entry("m/_softmax/abc123", "rows-C.cpp", "int c2;\n", 3.0));
  HistoryResult more = commit_history(dir.path(), "refs/heads/forge/kernels", entries, kAuthor);
  CHECK(more.commits_added == 1);
  CHECK(trim(git(dir.path(), "rev-parse forge/kernels~1")) == first.tip);
  CHECK(trim(git(dir.path(), "rev-list --count forge/kernels")) == "4");
  CHECK(git(dir.path(), "ls-tree --name-only forge/kernels:kernels/m/_softmax/abc123") ==
        "result.json\nrows-C.cpp\n");
}

TEST_CASE("a repository without commits gets the branch and keeps its unborn HEAD") {
  test::TempDir dir;
  git(dir.path(), "init -q -b main");
  test::write_text(dir / "forge.yaml", "models: {m: {run: 'true'}}\n");
  const std::string status = git(dir.path(), "status --porcelain");
  HistoryResult r = commit_history(dir.path(), "refs/heads/forge/kernels", two_targets(), kAuthor);
  CHECK(r.commits_added == 3);
  CHECK(sh("git -C '" + dir.path().string() + "' rev-parse --verify -q HEAD").rc != 0);
  CHECK(git(dir.path(), "status --porcelain") == status);
  CHECK(!fs::exists(dir / ".git" / "index"));
  CHECK(trim(git(dir.path(), "rev-list --count forge/kernels")) == "3");
}

TEST_CASE("outside any repository history goes to a bare repository under the store") {
  test::TempDir dir;
  test::write_text(dir / "forge.yaml", "models: {m: {run: 'true'}}\n");
  Manifest m = load_manifest(dir / "forge.yaml");
  CHECK(locate_history_repo(m, /*create=*/false).empty());
  fs::path repo = locate_history_repo(m, /*create=*/true);
  CHECK(repo == dir / ".forge" / "history.git");
  HistoryResult r = commit_history(repo, m.history.ref, two_targets(), kAuthor);
  CHECK(r.commits_added == 3);
  CHECK(trim(sh("git --git-dir='" + repo.string() + "' rev-parse --is-bare-repository").out) ==
        "true");
  CHECK(trim(sh("git --git-dir='" + repo.string() + "' rev-list --count forge/kernels").out) ==
        "3");
  CHECK(locate_history_repo(m, /*create=*/false) == repo);
}

TEST_CASE("the repository is found upward from forge.yaml, or taken from history.repo") {
  test::TempDir dir;
  git(dir.path(), "init -q");
  test::write_text(dir / "proj" / "forge.yaml", "models: {m: {run: 'true'}}\n");
  Manifest m = load_manifest(dir / "proj" / "forge.yaml");
  CHECK(fs::equivalent(locate_history_repo(m, false), dir / ".git"));
  test::write_text(dir / "proj" / "forge.yaml",
                   "models: {m: {run: 'true'}}\nhistory: {ref: refs/forge/k, repo: ../other}\n");
  m = load_manifest(dir / "proj" / "forge.yaml");
  CHECK(locate_history_repo(m, false).empty());  // not there yet
  CHECK(locate_history_repo(m, true) == dir / "other");
  CHECK(m.history.ref == "refs/forge/k");
}

TEST_CASE("identical input gives identical trees, and identical commits with a fixed time") {
  test::TempDir a, b;
  git(a.path(), "init -q");
  git(b.path(), "init -q");
  HistoryResult ra = commit_history(a.path(), "refs/heads/forge/kernels", two_targets(), kAuthor);
  HistoryResult rb = commit_history(b.path(), "refs/heads/forge/kernels", two_targets(), kAuthor);
  CHECK(git(a.path(), "log --format=%T forge/kernels") ==
        git(b.path(), "log --format=%T forge/kernels"));
  CHECK(ra.tip == rb.tip);

  // SOURCE_DATE_EPOCH fixes the time of an author taken from git config.
  git(a.path(), "config user.name Cfg");
  git(a.path(), "config user.email cfg@x");
  ::setenv("SOURCE_DATE_EPOCH", "1234567890", 1);
  commit_history(a.path(), "refs/heads/forge/kernels",
                 {entry("m/x/aaaaaa", "x.cpp", "int x;\n", 1.1)});
  ::unsetenv("SOURCE_DATE_EPOCH");
  CHECK(git(a.path(), "log -1 --format=%an/%ae/%at/%ct forge/kernels") ==
        "Cfg/cfg@x/1234567890/1234567890\n");
}

TEST_CASE("the checked-out branch is never moved, and bad entries are refused") {
  test::TempDir dir;
  git(dir.path(), "init -q -b forge/kernels");
  CHECK_THROWS_WITH_AS(
      commit_history(dir.path(), "refs/heads/forge/kernels", two_targets(), kAuthor),
      doctest::Contains("is checked out in"), Error);
  auto bad = two_targets();
  bad[0].file = "../x.cpp";
  CHECK_THROWS_AS(commit_history(dir.path(), "refs/heads/other", bad, kAuthor), Error);
  bad[0].file = "result.json";
  CHECK_THROWS_AS(commit_history(dir.path(), "refs/heads/other", bad, kAuthor), Error);
  test::TempDir plain;
  test::write_text(plain / "file.txt", "x");
  CHECK_THROWS_WITH_AS(commit_history(plain.path(), "refs/heads/k", two_targets(), kAuthor),
                       doctest::Contains("is not a git repository"), Error);
}

TEST_CASE("read_history and diff_history read the branch back") {
  test::TempDir dir;
  git(dir.path(), "init -q");
  CHECK(read_history(dir.path(), "refs/heads/forge/kernels").empty());
  commit_history(dir.path(), "refs/heads/forge/kernels", two_targets(), kAuthor);
  auto log = read_history(dir.path(), "refs/heads/forge/kernels");
  REQUIRE(log.size() == 3);
  CHECK(log[0].subject == "forge: m/mean.dim/def456 1.20x over eager (s {})");
  CHECK(log[2].fields.at("target") == "m/_softmax/abc123");
  CHECK(log[2].fields.at("speedup_eager") == "1.50");
  std::string diff = diff_history(dir.path(), "forge/kernels~2", "forge/kernels~1");
  CHECK(diff.find("--- a/kernels/m/_softmax/abc123/rows-A.cpp") != std::string::npos);
  CHECK(diff.find("+++ b/kernels/m/_softmax/abc123/rows-B.cpp") != std::string::npos);
  CHECK(diff.find("-int a;") != std::string::npos);
  CHECK(diff.find("+int b;") != std::string::npos);
  CHECK_THROWS_WITH_AS(diff_history(dir.path(), "nope", "forge/kernels"),
                       doctest::Contains("unknown revision 'nope'"), Error);
}

TEST_CASE("forge log and forge diff") {
  test::TempDir dir;
  git(dir.path(), "init -q");
  test::write_text(dir / "forge.yaml", "models: {m: {run: 'true'}}\n");
  auto none = test::run_forge("log", dir.path());
  CHECK(none.exit_code == 0);
  CHECK(none.out == "no history for any target in refs/heads/forge/kernels\n");
  HistoryResult r = commit_history(dir.path(), "refs/heads/forge/kernels", two_targets(), kAuthor);

  auto all = test::run_forge("log", dir.path());
  INFO(all.err);
  CHECK(all.exit_code == 0);
  CHECK(all.out.substr(0, 8) == r.tip.substr(0, 7) + " ");
  CHECK(all.out.find("m/mean.dim/def456") != std::string::npos);
  auto soft = test::run_forge("--json log m/_soft", dir.path());
  REQUIRE(soft.exit_code == 0);
  json list = json::parse(soft.out);
  REQUIRE(list.size() == 2);
  CHECK(list[0]["target"] == "m/_softmax/abc123");
  CHECK(list[0]["speedup_eager"] == 2.0);
  CHECK(list[0]["iteration"] == 1);
  CHECK(list[0]["proposer"] == "strategy:s {}");

  auto diff = test::run_forge("diff forge/kernels~1 forge/kernels", dir.path());
  CHECK(diff.exit_code == 0);
  CHECK(diff.out.find("+++ b/kernels/m/mean.dim/def456/mean-A.cpp") != std::string::npos);
  CHECK(test::run_forge("diff forge/kernels", dir.path()).exit_code == 2);
  CHECK(test::run_forge("diff nope forge/kernels", dir.path()).exit_code == 1);
}

TEST_SUITE_END();
}  // namespace forge
