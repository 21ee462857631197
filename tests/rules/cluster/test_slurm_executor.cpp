// The Slurm executor against a real slurmctld/slurmd on this machine
// (tests/daemon_env.h), with a stand-in worker script that answers like
// forge_worker and logs when it ran and which CUDA_VISIBLE_DEVICES it saw.
// Its behaviour is chosen by the candidate's file name:
//   ok*           accepted after 1.5 s
//   cancel-once*  first attempt: the job cancels itself (scancel)
//   hang-once*    first attempt: sleeps past the job's time limit (Slurm TIMEOUT)
//   crash*        the worker dies of SIGSEGV
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <sstream>
#include <thread>

#include "rules/cluster/slurm_executor.h"
#include "rules/cluster/slurm_queue.h"
#include "tests/daemon_env.h"
#include "tests/support.h"

namespace forge {
namespace fs = std::filesystem;

namespace {

const char* kFakeWorker = R"SH(#!/bin/bash
echo '{"hello":"forge_worker","abi":1,"backend":"cpu","pid":'$$'}'
while IFS= read -r line; do
  cand=$(printf '%s' "$line" | sed -n 's/.*"candidate":"\([^"]*\)".*/\1/p')
  name=$(basename "$cand")
  marker="$FAKE_DIR/$name.tried"
  case "$name" in
    cancel-once*) if [ ! -e "$marker" ]; then touch "$marker"
                    scancel "${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}"; sleep 60; fi;;
    hang-once*) if [ ! -e "$marker" ]; then touch "$marker"; sleep 600; fi;;
    crash*) kill -SEGV $$;;
  esac
  s=$(date +%s.%N); sleep 1.5; e=$(date +%s.%N)
  echo "$s $e ${CUDA_VISIBLE_DEVICES-none} $name" >> "$FAKE_DIR/runs.log"
  echo '{"id":"1","verdict":"accepted","reason":"ok","detail":"","verify":{"cases":1},"seconds":1.5}'
done
)SH";

struct Run {
  double start, end;
  std::string devices, name;
};

std::vector<Run> read_runs(const fs::path& log) {
  std::vector<Run> runs;
  std::istringstream in(test::read_text(log));
  Run r;
  while (in >> r.start >> r.end >> r.devices >> r.name) runs.push_back(r);
  return runs;
}

struct Fixture {
  test::TempDir dir;
  std::vector<std::string> warnings;
  SlurmExecutorOptions options() {
    test::write_text(dir / "worker.sh", kFakeWorker);
    fs::permissions(dir / "worker.sh", fs::perms::owner_all, fs::perm_options::add);
    SlurmExecutorOptions o;
    o.worker = dir / "worker.sh";
    o.env["FAKE_DIR"] = dir.path().string();
    o.work_dir = dir / "slurm";
    o.fingerprint = "fake";
    o.start_timeout_seconds = 600;
    o.slurm.max_parallel = 2;
    o.slurm.gres = "gpu:1";
    o.slurm.poll_seconds = 0.5;
    o.slurm.retries = 1;
    o.warn = [this](const std::string& m) { warnings.push_back(m); };
    return o;
  }
  EvalRequest request(const std::string& name) {
    EvalRequest r;
    r.op = "_softmax";
    r.candidate = dir / name;
    r.timeout_seconds = 30;
    return r;
  }
};

}  // namespace

TEST_SUITE_BEGIN("rules::SlurmExecutor");

TEST_CASE("a batch is one job array: at most max_parallel at once, each with its own GPU") {
  FORGE_SKIP_WITHOUT_DAEMONS();
  Fixture f;
  auto ex = make_slurm_executor(f.options());
  CHECK(ex->fingerprint() == "slurm||gpu:1|fake");
  std::vector<EvalRequest> reqs;
  for (int i = 0; i < 5; ++i) reqs.push_back(f.request("ok" + std::to_string(i) + ".so"));
  auto results = ex->evaluate_batch(reqs);
  REQUIRE(results.size() == 5);
  for (const auto& r : results) {
    CHECK(r.verdict == "accepted");
    CHECK(r.reply["cuda_visible_devices"].get<std::string>().size() == 1);
  }
  CHECK(ex->worker_info()["hello"] == "forge_worker");
  auto runs = read_runs(f.dir / "runs.log");
  REQUIRE(runs.size() == 5);
  int peak = 0;
  for (const auto& a : runs) {
    int overlapping = 0;
    for (const auto& b : runs) {
      if (b.start < a.end && a.start < b.end) {
        ++overlapping;
        if (&a != &b) CHECK_MESSAGE(a.devices != b.devices, a.name << " and " << b.name << " shared GPU " << a.devices);
      }
    }
    peak = std::max(peak, overlapping);
  }
  CHECK(peak <= 2);
  MESSAGE("evaluations at once: at most " << peak);
  CHECK(f.warnings.empty());
}

TEST_CASE("a crash inside the job is the candidate's: rejected, not retried") {
  FORGE_SKIP_WITHOUT_DAEMONS();
  Fixture f;
  auto ex = make_slurm_executor(f.options());
  auto r = ex->evaluate(f.request("crash.so"));
  CHECK(r.verdict == "rejected");
  CHECK(r.reason == "crashed (signal 11: Segmentation fault)");
  CHECK(f.warnings.empty());
}

TEST_CASE("a cancelled job and a timed-out job are reported and retried") {
  FORGE_SKIP_WITHOUT_DAEMONS();
  Fixture f;
  auto o = f.options();
  o.slurm.time_limit = "1";  // minutes: Slurm's smallest; it notices within ~30 s more
  auto ex = make_slurm_executor(o);
  auto results = ex->evaluate_batch({f.request("cancel-once.so"), f.request("hang-once.so")});
  REQUIRE(results.size() == 2);
  for (const auto& r : results) {
    CHECK(r.verdict == "accepted");
    INFO(r.reply.dump());
    CHECK(r.reply["notes"].size() == 1);
  }
  std::string all;
  for (const auto& w : f.warnings) all += w + "\n";
  INFO(all);
  CHECK(f.warnings.size() == 2);
  CHECK(all.find("ended CANCELLED") != std::string::npos);
  CHECK(all.find("ended TIMEOUT (TimeLimit)") != std::string::npos);
  CHECK(all.find("retrying (1 of 1)") != std::string::npos);
}

TEST_CASE("after the last retry a killed job is an error naming Slurm's state") {
  FORGE_SKIP_WITHOUT_DAEMONS();
  Fixture f;
  auto o = f.options();
  o.slurm.retries = 0;
  auto ex = make_slurm_executor(o);
  auto r = ex->evaluate(f.request("cancel-once.so"));
  CHECK(r.verdict == "error");
  CHECK(r.reason == "slurm_cancelled");
  CHECK(r.detail.find("CANCELLED") != std::string::npos);
  REQUIRE(f.warnings.size() == 1);
  CHECK(f.warnings[0].find("giving up after 1 attempts") != std::string::npos);
}

TEST_CASE("SIGINT while jobs run cancels them, then forge dies of the signal") {
  FORGE_SKIP_WITHOUT_DAEMONS();
  Fixture f;
  auto o = f.options();
  const fs::path work = o.work_dir;
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::signal(SIGINT, SIG_DFL);  // forge's own disposition, not doctest's crash reporter
    auto ex = make_slurm_executor(o);
    ex->evaluate(f.request("hang-once.so"));
    ::_exit(0);
  }
  // Wait until the job runs (the worker leaves its marker), then interrupt.
  for (int i = 0; i < 200 && !fs::exists(f.dir / "hang-once.so.tried"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  REQUIRE(fs::exists(f.dir / "hang-once.so.tried"));
  ::kill(child, SIGINT);
  int status = 0;
  ::waitpid(child, &status, 0);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGINT);
  // The job is gone from the running set: squeue shows it cancelled.
  std::string state;
  for (int i = 0; i < 50; ++i) {
    std::system(("squeue -h -t all -n forge-eval -o '%i|%T' > '" + (f.dir / "q").string() + "'").c_str());
    state = test::read_text(f.dir / "q");
    if (state.find("RUNNING") == std::string::npos && state.find("PENDING") == std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  CHECK(state.find("RUNNING") == std::string::npos);
  CHECK(state.find("CANCELLED") != std::string::npos);
}

TEST_SUITE_END();

}  // namespace forge
