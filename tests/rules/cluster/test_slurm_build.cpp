// Whole `forge build`s on the CPU backend through the one-machine Slurm
// cluster and the nginx WebDAV cache (tests/daemon_env.h): evaluations run as
// Slurm jobs, a rebuild submits none, a second store fed by the shared cache
// runs nothing, a corrupted blob on the server is caught and recomputed, and a
// stopped cache costs nothing but a warning. Skipped (visibly) without torch
// or without the daemons.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "tests/daemon_env.h"
#include "tests/support.h"

namespace forge {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Evaluation jobs submitted from `store`: one batch folder per sbatch.
int batches(const fs::path& store) {
  int n = 0;
  std::error_code ec;
  if (fs::exists(store / "build" / "slurm"))
    for (const auto& e : fs::directory_iterator(store / "build" / "slurm", ec)) n += e.is_directory();
  return n;
}

// `ops`, `iterations`: the stores that only show the cache's failure modes
// search one op once (their capture still comes from the cache).
void make_project(const fs::path& dir, const std::string& cache_url,
                  const std::string& ops = "native_layer_norm, _softmax", int iterations = 2) {
  const fs::path repo = fs::path(FORGE_TEST_DIR).parent_path();
  fs::create_directories(dir);
  fs::copy_file(repo / "examples" / "tiny" / "transformer.py", dir / "transformer.py");
  test::write_text(dir / "forge.yaml",
                   "models:\n  transformer: {run: python transformer.py, check_runs: 1}\n"
                   "targets: {ops: [" + ops + "], top: 0, min_share: 0, chains: 0}\n"
                   "budget: {iterations: " + std::to_string(iterations) + "}\n"
                   "executor: slurm\n"
                   "slurm: {gres: 'gpu:1', max_parallel: 2, poll_seconds: 0.5, retries: 1}\n"
                   "cache: {url: '" + cache_url + "', timeout_seconds: 3}\n");
}

json build(const fs::path& dir, std::string* err = nullptr) {
  auto r = test::run_forge("--json build", dir);
  if (err) *err = r.err;
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  return json::parse(r.out);
}

}  // namespace

TEST_SUITE_BEGIN("rules::SlurmBuild");

TEST_CASE("builds through Slurm and a shared HTTP cache") {
  const fs::path repo = fs::path(FORGE_TEST_DIR).parent_path();
  FORGE_SKIP_WITHOUT_TORCH();
  FORGE_SKIP_WITHOUT_DAEMONS();
  auto& env = test::DaemonEnv::get();
  test::TempDir dir;
  const std::string url = env.cache_url() + "-" + dir.path().filename().string();

  // A multi-target build: every evaluation a Slurm job on one of two fake GPUs.
  make_project(dir / "a", url);
  json a = build(dir / "a");
  REQUIRE(a["targets"].size() >= 2);
  for (const auto& t : a["targets"]) CHECK(t["iterations"] == 2);
  const int jobs = batches(dir / "a" / ".forge");
  CHECK(jobs >= 2);
  MESSAGE("first build: " << a["steps_run"] << " steps run, " << jobs << " Slurm submissions");
  for (const auto& batch : fs::directory_iterator(dir / "a" / ".forge" / "build" / "slurm")) {
    const std::string devices = test::read_text(batch.path() / "0" / "devices");
    CHECK_MESSAGE((devices == "0\n" || devices == "1\n"), batch.path() << ": " << devices);
  }

  // A rebuild finds everything: no job is submitted.
  json again = build(dir / "a");
  CHECK(again["steps_run"] == 0);
  CHECK(batches(dir / "a" / ".forge") == jobs);

  // A second store (another folder, as a teammate's clone) on the same cache
  // runs nothing: no Slurm job, no step.
  make_project(dir / "b", url);
  json b = build(dir / "b");
  CHECK(batches(dir / "b" / ".forge") == 0);
  CHECK(b["steps_run"] == 0);
  MESSAGE("second store: " << b["steps_run"] << " steps run");

  // Corrupt every blob and entry on the server: a third store detects it
  // (warnings) and recomputes.
  const fs::path root = env.dav_root() / ("forge-" + dir.path().filename().string());
  int corrupted = 0;
  for (const auto& f : fs::recursive_directory_iterator(root)) {
    if (!f.is_regular_file()) continue;
    std::string text = test::read_text(f.path());
    test::write_text(f.path(), text + "tampered");
    ++corrupted;
  }
  CHECK(corrupted > 0);
  make_project(dir / "c", url, "_softmax", 1);
  std::string err;
  json c = build(dir / "c", &err);
  CHECK(c["steps_run"].get<int>() > 0);
  CHECK((err.find("does not hash to its name") != std::string::npos ||
         err.find("fails its checksum") != std::string::npos));

  // The cache stopped: the build finishes on local work, with one warning.
  env.stop_nginx();
  make_project(dir / "d", url, "_softmax", 1);
  json d = build(dir / "d", &err);
  env.start_nginx();
  CHECK(d["steps_run"].get<int>() > 0);
  CHECK(err.find("is not answering") != std::string::npos);
}

TEST_SUITE_END();

}  // namespace forge
