// The worker side of evaluation, without torch: a fake worker (a small Python
// script speaking docs/WORKER.md's protocol) that replies, crashes, hangs or
// prints garbage on demand, driven through WorkerProcess, the local Executor,
// and the evaluation glue (static check -> compile -> executor -> cached record).
#include <doctest/doctest.h>
#include <signal.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <thread>

#include "engine/build.h"
#include "rules/evaluate/evaluate.h"
#include "rules/evaluate/executor.h"
#include "rules/evaluate/worker_client.h"
#include "tests/support.h"
#include "util/hash.h"

namespace forge {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The candidate's file name says what the fake does with the request.
const char* kFakeWorker = R"PY(
import json, os, signal, subprocess, sys, time
start = os.environ.get("FAKE_START", "")
if start == "die":
    sys.stderr.write("fake_worker: cannot initialize the device\n")
    sys.exit(2)
if start == "garbage":
    print("this is not a hello", flush=True)
    time.sleep(60)
print(json.dumps({"hello": "forge_worker", "abi": 1, "backend": "cpu", "pid": os.getpid()}),
      flush=True)
def reply(obj):
    print(json.dumps(obj), flush=True)
for line in sys.stdin:
    req = json.loads(line)
    rid = req.get("id")
    if req.get("cmd") == "quit":
        reply({"id": rid, "ok": True})
        sys.exit(0)
    if req.get("cmd") == "ping":
        reply({"id": rid, "ok": True})
        continue
    cand = os.environ.get("FAKE_AS") or os.path.basename(req.get("candidate", ""))
    sys.stderr.write("fake_worker: evaluating %s\n" % cand)
    sys.stderr.flush()
    if cand == "crash.so":
        sys.stderr.write("fake_worker: about to fault\n")
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGSEGV)
    elif cand == "abort.so":
        os.abort()
    elif cand == "exit.so":
        os._exit(4)
    elif cand == "hang.so":
        child = subprocess.Popen(["sleep", "1000"])
        with open(os.environ["FAKE_PIDFILE"], "w") as f:
            f.write(str(child.pid))
        time.sleep(1000)
    elif cand == "garbage.so":
        print("Segmentation fault? no, just text on stdout", flush=True)
    elif cand == "wrong_id.so":
        reply({"id": "not-" + str(rid), "verdict": "accepted", "reason": "ok"})
    elif cand == "sticky.so":
        reply({"id": rid, "verdict": "rejected", "reason": "cuda_error",
               "detail": "sticky CUDA error an illegal memory access was encountered"})
        os._exit(3)
    elif cand == "bad_request.so":
        reply({"id": rid, "error": "\"args\" must be an array"})
    elif cand.startswith("wrong"):
        reply({"id": rid, "verdict": "rejected", "reason": "wrong_result",
               "detail": "out[0,3] = 0.5 vs 0.25 on sample 0",
               "verify": {"cases": 1, "worst_abs": 0.25}})
    else:
        samples = req.get("samples", [])
        sizes = [os.path.getsize(e["file"]) for s in samples for e in s["inputs"] if e]
        reply({"id": rid, "verdict": "accepted", "reason": "ok", "detail": "verified on 3 cases",
               "verify": {"cases": 3, "worst_abs": 0.0, "worst_rel": 0.0,
                          "sample_bytes": sizes, "family": (req.get("family") or {}).get("name"),
                          "op": req.get("op"), "overload": req.get("overload")},
               "bench": {"candidate_us": {"median": 10.0, "spread": 0.5, "reps": 30},
                         "eager_us": {"median": 15.0, "spread": 0.4, "reps": 30},
                         "speedup_eager": 1.5, "faster": True}})
)PY";

struct Fake {
  test::TempDir dir;
  fs::path script = dir / "fake_worker.py";
  fs::path log = dir / "worker.log";
  fs::path pidfile = dir / "child.pid";
  Fake() { test::write_text(script, kFakeWorker); }

  WorkerCommand command(const std::string& start = "") const {
    WorkerCommand c;
    c.argv = {"python3", "-u", script.string()};
    c.env = {{"FAKE_PIDFILE", pidfile.string()}, {"FAKE_START", start}};
    c.log = log;
    c.start_timeout_seconds = 20;
    return c;
  }
  json evaluate(const std::string& candidate) const {
    return {{"cmd", "evaluate"}, {"candidate", (dir / candidate).string()}};
  }
};

bool process_gone(pid_t pid) {
  for (int i = 0; i < 100; ++i) {
    if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
    // A zombie waiting for its reaper counts as gone.
    std::string stat = test::read_text("/proc/" + std::to_string(pid) + "/stat");
    auto close = stat.rfind(')');
    if (close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z')
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

}  // namespace

TEST_SUITE_BEGIN("rules::WorkerClient");

TEST_CASE("hello, then one reply per request on the same worker") {
  Fake f;
  WorkerProcess w(f.command());
  WorkerReply r = w.request(f.evaluate("ok.so"), 20);
  REQUIRE_MESSAGE(r.ok(), r.reason << ": " << r.detail);
  CHECK(w.hello()["hello"] == "forge_worker");
  CHECK(r.value["verdict"] == "accepted");
  CHECK(r.value["id"].is_string());
  const pid_t pid = w.pid();
  r = w.request({{"cmd", "ping"}}, 20);
  CHECK(r.ok());
  CHECK(r.value["ok"] == true);
  CHECK(w.pid() == pid);
  CHECK(w.starts() == 1);
}

TEST_CASE("a crash is named by its signal; the next request gets a fresh worker") {
  Fake f;
  WorkerProcess w(f.command());
  REQUIRE(w.request(f.evaluate("ok.so"), 20).ok());
  WorkerReply r = w.request(f.evaluate("crash.so"), 20);
  CHECK(r.status == WorkerReply::Status::Crashed);
  CHECK(r.reason == "crashed (signal 11: Segmentation fault)");
  // The detail quotes the worker's last log lines of this request only.
  CHECK(r.detail == "fake_worker: evaluating crash.so | fake_worker: about to fault");
  CHECK_FALSE(w.running());
  r = w.request(f.evaluate("ok.so"), 20);
  CHECK(r.ok());
  CHECK(w.starts() == 2);

  CHECK(w.request(f.evaluate("abort.so"), 20).reason == "crashed (signal 6: Aborted)");
  CHECK(w.request(f.evaluate("exit.so"), 20).reason == "crashed (exit code 4)");
  CHECK(w.request(f.evaluate("ok.so"), 20).ok());
}

TEST_CASE("a hang times out; the whole process group is killed; the worker restarts") {
  Fake f;
  WorkerProcess w(f.command());
  REQUIRE(w.request(f.evaluate("ok.so"), 20).ok());
  const pid_t worker_pid = w.pid();
  auto t0 = std::chrono::steady_clock::now();
  WorkerReply r = w.request(f.evaluate("hang.so"), 1.5);
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(r.status == WorkerReply::Status::Timeout);
  CHECK(r.reason == "timeout");
  CHECK(r.detail == "no reply within 1 s; the worker was killed");
  CHECK(waited < 5);
  CHECK(process_gone(worker_pid));
  // The `sleep` the hung worker started went with it.
  const pid_t child = std::stoi(test::read_text(f.pidfile));
  CHECK(process_gone(child));
  CHECK(w.request(f.evaluate("ok.so"), 20).ok());
  CHECK(w.starts() == 2);
}

TEST_CASE("a garbled or mismatched line is a protocol failure; the worker restarts") {
  Fake f;
  WorkerProcess w(f.command());
  WorkerReply r = w.request(f.evaluate("garbage.so"), 20);
  CHECK(r.status == WorkerReply::Status::Protocol);
  CHECK(r.reason == "worker_protocol");
  CHECK(r.detail == "unexpected line from the worker: Segmentation fault? no, just text on stdout");
  CHECK_FALSE(w.running());
  r = w.request(f.evaluate("wrong_id.so"), 20);
  CHECK(r.reason == "worker_protocol");
  CHECK(w.request(f.evaluate("ok.so"), 20).ok());
  CHECK(w.starts() == 3);
}

TEST_CASE("a worker that exits after its reply is replaced, not blamed on the next request") {
  Fake f;
  WorkerProcess w(f.command());
  WorkerReply r = w.request(f.evaluate("sticky.so"), 20);
  REQUIRE(r.ok());
  CHECK(r.value["reason"] == "cuda_error");
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // it exits meanwhile
  r = w.request(f.evaluate("ok.so"), 20);
  CHECK(r.ok());
  CHECK(w.starts() == 2);
}

TEST_CASE("a worker that cannot start says why") {
  Fake f;
  WorkerProcess dies(f.command("die"));
  WorkerReply r = dies.request(f.evaluate("ok.so"), 20);
  CHECK(r.status == WorkerReply::Status::StartFailed);
  CHECK(r.reason == "worker_failed_to_start");
  CHECK(r.detail == "crashed (exit code 2): fake_worker: cannot initialize the device");
  WorkerProcess garbage(f.command("garbage"));
  r = garbage.request(f.evaluate("ok.so"), 20);
  CHECK(r.reason == "worker_failed_to_start");
  CHECK(r.detail == "the first line is not a hello: this is not a hello");
  WorkerCommand missing = f.command();
  missing.argv = {(f.dir / "no_such_worker").string()};
  WorkerProcess nothing(missing);
  r = nothing.request(f.evaluate("ok.so"), 20);
  CHECK(r.reason == "worker_failed_to_start");
  CHECK(r.detail.find("cannot run") != std::string::npos);
}

TEST_CASE("destroying the client ends the worker") {
  Fake f;
  pid_t pid = -1;
  {
    WorkerProcess w(f.command());
    REQUIRE(w.request(f.evaluate("ok.so"), 20).ok());
    pid = w.pid();
  }
  CHECK(process_gone(pid));
}

TEST_SUITE_END();

TEST_SUITE_BEGIN("rules::Executor");

TEST_CASE("the local executor maps replies, crashes and hangs to verdicts") {
  Fake f;
  LocalExecutorOptions o;
  o.worker = "python3";
  o.args = {"-u", f.script.string()};
  o.env = {{"FAKE_PIDFILE", f.pidfile.string()}};
  o.log = f.log;
  o.fingerprint = "fake";
  auto ex = make_local_executor(o);
  CHECK(ex->fingerprint() == "local|fake");
  auto eval = [&](const std::string& cand, double timeout = 20) {
    EvalRequest req;
    req.op = "_softmax";
    req.family = {{"name", "softmax"}};
    req.candidate = f.dir / cand;
    req.timeout_seconds = timeout;
    return ex->evaluate(req);
  };
  EvalResult ok = eval("ok.so");
  CHECK(ok.verdict == "accepted");
  CHECK(ok.reason == "ok");
  CHECK(ok.bench["speedup_eager"] == 1.5);
  CHECK(ok.verify["op"] == "_softmax");
  const auto pid = ex->worker_info()["pid"];

  EvalResult wrong = eval("wrong.so");
  CHECK(wrong.verdict == "rejected");
  CHECK(wrong.reason == "wrong_result");
  CHECK(wrong.detail == "out[0,3] = 0.5 vs 0.25 on sample 0");
  // After a rejection the next candidate gets a fresh worker.
  CHECK(eval("ok.so").accepted());
  CHECK(ex->worker_info()["pid"] != pid);

  CHECK(eval("crash.so").reason == "crashed (signal 11: Segmentation fault)");
  CHECK(eval("crash.so").verdict == "rejected");
  CHECK(eval("hang.so", 1).reason == "timeout");
  CHECK(eval("garbage.so").reason == "worker_protocol");
  EvalResult sticky = eval("sticky.so");
  CHECK(sticky.reason == "cuda_error");
  EvalResult refused = eval("bad_request.so");
  CHECK(refused.verdict == "error");
  CHECK(refused.reason == "worker_error");
  CHECK(refused.detail == "\"args\" must be an array");
  CHECK(eval("ok.so").accepted());
}

TEST_CASE("a worker that cannot start is an error, not a rejection") {
  Fake f;
  LocalExecutorOptions o;
  o.worker = f.dir / "missing_worker";
  o.log = f.log;
  auto ex = make_local_executor(o);
  EvalRequest req;
  req.candidate = f.dir / "ok.so";
  EvalResult r = ex->evaluate(req);
  CHECK(r.verdict == "error");
  CHECK(r.reason == "worker_failed_to_start");
}

TEST_SUITE_END();

// The evaluation glue with the fake worker: what reaches the worker, and what
// is cached.
TEST_SUITE_BEGIN("rules::Evaluate");

namespace {

class CountingExecutor : public Executor {
 public:
  explicit CountingExecutor(std::unique_ptr<Executor> inner) : m_inner(std::move(inner)) {}
  std::string fingerprint() const override { return m_inner->fingerprint(); }
  json worker_info() const override { return m_inner->worker_info(); }
  EvalResult evaluate(const EvalRequest& r) override {
    ++calls;
    last = r;
    return m_inner->evaluate(r);
  }
  int calls = 0;
  EvalRequest last;

 private:
  std::unique_ptr<Executor> m_inner;
};

const char* kGoodCandidate =
    "#include \"forge_kernel.h\"\n"
    "extern \"C\" int forge_kernel(const forge_call* call) { return call ? 0 : 1; }\n";

struct EvalWorld {
  Fake fake;
  test::TempDir dir;
  Manifest manifest;
  std::unique_ptr<store::Store> store;
  Progress progress{false};
  std::unique_ptr<Builder> builder;
  std::unique_ptr<CommandRunner> runner = make_process_runner();
  std::unique_ptr<BuildContext> ctx;
  std::unique_ptr<CountingExecutor> executor;
  Target target;
  Family family;

  EvalWorld() {
    test::write_text(dir / "forge.yaml", "models:\n  m: {run: python m.py}\n");
    manifest = load_manifest(dir / "forge.yaml");
    store = store::open_local_store(manifest.store, [](const std::string&) {});
    builder = std::make_unique<Builder>(*store, progress);
    Toolchain tc;
    Command c;
    c.argv = {"c++", "--version"};
    CommandResult v = runner->run(c);
    tc.cxx = v.out.substr(0, v.out.find('\n'));
    ctx.reset(
        new BuildContext{manifest, *builder, *runner, tc, {"cpu", "Test CPU", "x86_64", ""}, {}});
    LocalExecutorOptions o;
    o.worker = "python3";
    o.args = {"-u", fake.script.string()};
    o.env = {{"FAKE_PIDFILE", fake.pidfile.string()}};
    o.log = fake.log;
    o.fingerprint = "fake";
    executor = std::make_unique<CountingExecutor>(make_local_executor(o));

    target.id = "m/_softmax/abcdef";
    target.op = "_softmax";
    target.signature = "_softmax(f32[2,3]{3,1}, -1, False)";
    target.calls = 4;
    target.time_us = 40;
    target.args = json::array({{{"type", "Tensor"}, {"dtype", "float32"}, {"sizes", {2, 3}}},
                               {{"type", "int"}, {"value", -1}},
                               {{"type", "bool"}, {"value", false}}});
    const std::string raw(24, '\x01');
    target.sample_inputs = json::array(
        {{{"inputs", json::array({{{"type", "Tensor"}, {"digest", store->put_object(raw)}},
                                  {{"type", "int"}, {"value", -1}},
                                  {{"type", "bool"}, {"value", false}}})}}});
    family = *find_family(load_families(default_targets_dir()), "_softmax");
  }
  json eval(const std::string& name, const std::string& text) {
    return evaluate_candidates(*ctx, *executor, target, family, {{name, text, CandidateLang::Cpp}})
        .front();
  }
};

}  // namespace

TEST_CASE("an accepted candidate: samples as files, family as JSON, the record cached") {
  EvalWorld w;
  json r = w.eval("ok.cpp", kGoodCandidate);
  INFO(r.dump(2));
  CHECK(r["verdict"] == "accepted");
  CHECK(r["reason"] == "ok");
  CHECK(r["static"] == json::array());
  CHECK(r["compile"]["ok"] == true);
  CHECK(r["evaluation"]["cached"] == false);
  CHECK(r["bench"]["speedup_eager"] == 1.5);
  CHECK(r["baseline"]["captured_us"] == 10.0);
  CHECK(r["baseline"]["compile_us"].is_null());
  // What the worker got: the op split from its overload, the family, the samples.
  CHECK(r["verify"]["op"] == "_softmax");
  CHECK(r["verify"]["overload"] == "");
  CHECK(r["verify"]["family"] == "softmax");
  CHECK(r["verify"]["sample_bytes"] == json::array({24}));
  const json& s = w.executor->last.samples;
  REQUIRE(s.size() == 1);
  CHECK(s[0]["inputs"][1].is_null());
  CHECK(test::read_text(s[0]["inputs"][0]["file"].get<std::string>()) == std::string(24, '\x01'));
  CHECK(w.executor->last.timeout_seconds == 60);

  json again = w.eval("renamed.cpp", kGoodCandidate);
  CHECK(w.executor->calls == 1);
  CHECK(again["evaluation"]["cached"] == true);
  CHECK(again["compile"]["cached"] == true);
  CHECK(again["verdict"] == "accepted");

  // A different family file is a different evaluation.
  w.family.digest = sha256_hex("edited family");
  w.eval("ok.cpp", kGoodCandidate);
  CHECK(w.executor->calls == 2);
}

TEST_CASE("rejections are cached; errors are not") {
  EvalWorld w;
  // A fake that treats every candidate as a wrong one.
  LocalExecutorOptions o;
  o.worker = "python3";
  o.args = {"-u", w.fake.script.string()};
  o.env = {{"FAKE_AS", "wrong.so"}};
  o.log = w.fake.log;
  o.fingerprint = "fake-rejecting";
  CountingExecutor rejecting(make_local_executor(o));
  for (int i = 0; i < 2; ++i) {
    json r = evaluate_candidates(*w.ctx, rejecting, w.target, w.family,
                                 {{"ok.cpp", kGoodCandidate, CandidateLang::Cpp}})
                 .front();
    CHECK(r["verdict"] == "rejected");
    CHECK(r["reason"] == "wrong_result");
    CHECK(r["evaluation"]["cached"] == (i == 1));
  }
  CHECK(rejecting.calls == 1);

  o.worker = w.fake.dir / "missing_worker";
  o.args = {};
  o.fingerprint = "fake-missing";
  CountingExecutor broken(make_local_executor(o));
  for (int i = 0; i < 2; ++i) {
    json r = evaluate_candidates(*w.ctx, broken, w.target, w.family,
                                 {{"ok.cpp", kGoodCandidate, CandidateLang::Cpp}})
                 .front();
    CHECK(r["verdict"] == "error");
    CHECK(r["reason"] == "worker_failed_to_start");
  }
  CHECK(broken.calls == 2);  // not cached
}

TEST_CASE("the static check and the compiler reject before the worker sees anything") {
  EvalWorld w;
  json r = w.eval("threads.cpp", std::string(kGoodCandidate) +
                                     "#include <thread>\nvoid f() { std::thread t([]{}); }\n");
  CHECK(r["verdict"] == "rejected");
  CHECK(r["reason"] == "static_check");
  CHECK(r["static"][0]["rule"] == "thread");
  CHECK(r["static"][0]["line"] == 4);
  CHECK(r["detail"].get<std::string>().rfind("thread (line 4): starts a thread", 0) == 0);
  CHECK_FALSE(r.contains("compile"));

  r = w.eval("broken.cpp", std::string(kGoodCandidate) + "int g() { return nope; }\n");
  CHECK(r["verdict"] == "rejected");
  CHECK(r["reason"] == "compile_error");
  CHECK(r["detail"].get<std::string>().find("nope") != std::string::npos);
  CHECK(r["detail"].get<std::string>().find("was not declared") != std::string::npos);
  CHECK(r["compile"]["log"].get<std::string>().find("candidate.cpp:3:") != std::string::npos);
  CHECK(w.executor->calls == 0);
}

TEST_CASE("a sample missing from the store is an error naming the target") {
  EvalWorld w;
  w.target.sample_inputs[0]["inputs"][0]["digest"] = sha256_hex("never stored");
  json r = w.eval("ok.cpp", kGoodCandidate);
  CHECK(r["verdict"] == "error");
  CHECK(r["reason"].get<std::string>().find("is missing from the store") != std::string::npos);
  CHECK(w.executor->calls == 0);
}

TEST_SUITE_END();
}  // namespace forge
