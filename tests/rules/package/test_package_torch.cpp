// The package end to end on the CPU: build an unmodified script's layer_norm
// target, then run other unmodified scripts under `forge run`: every spelling
// reaches the forged kernel, a call inside the signature family with another
// row count is forged too, calls outside it (dtype, shape, layout, grad, more
// rows than the worker verified) fall back to stock, outputs match a float64
// reference, and the program's exit code comes through. Skipped (visibly)
// where torch is not importable.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "tests/support.h"

namespace forge {
namespace fs = std::filesystem;
using nlohmann::json;

TEST_SUITE_BEGIN("rules::PackageTorch");

namespace {

const char* kApp = R"(import os, time, torch, torch.nn as nn
# The order of the end-to-end check's timed runs: S stock, F with the package.
libs = os.environ.get("FORGE_LOAD_LIBS", "")
if "libforge_capture" not in libs and os.environ.get("FORGE_PACKAGE_CHECK") != "1":
    open("runs.log", "a").write("F" if libs else "S")
torch.manual_seed(0)
ln = nn.LayerNorm(64)
x = torch.randn(4, 128, 64)
with torch.no_grad():  # inference: the guard leaves calls that need grad to stock
    t0 = time.perf_counter()
    for _ in range(3):
        y = ln(x)
print(float(y.sum()))
print("took %.4f ms" % ((time.perf_counter() - t0) * 1e3))
)";

// Compares every call against float64 (which the guard sends to stock).
const char* kProbe = R"(import sys, torch, torch.nn as nn, torch.nn.functional as F
torch.manual_seed(1)
w, b = torch.randn(64), torch.randn(64)
def check(y, x, shape=(64,), ww=w, bb=b):
    ref = F.layer_norm(x.double(), shape, ww.double(), bb.double(), 1e-5)
    err = (y.double() - ref).abs().max().item()
    if err > 1e-3 * max(1.0, ref.abs().max().item()):
        print("MISMATCH", tuple(x.shape), x.dtype, err); sys.exit(1)
x = torch.randn(4, 128, 64)
check(F.layer_norm(x, (64,), w, b, 1e-5), x)              # functional
m = nn.LayerNorm(64); m.weight.data.copy_(w); m.bias.data.copy_(b)
with torch.no_grad():
    check(m(x), x)                                          # module
check(torch.layer_norm(x, (64,), w, b, 1e-5), x)          # torch.*
x7 = torch.randn(7, 128, 64)
check(F.layer_norm(x7, (64,), w, b, 1e-5), x7)            # inside the family: 7 rows
x16 = torch.randn(16, 128, 64)
check(F.layer_norm(x16, (64,), w, b, 1e-5), x16)          # 16 rows: the package's vary_max here
x17 = torch.randn(17, 128, 64)
check(F.layer_norm(x17, (64,), w, b, 1e-5), x17)          # 17 rows: beyond what was verified, stock
xb = x.bfloat16()
F.layer_norm(xb, (64,), w.bfloat16(), b.bfloat16(), 1e-5) # another dtype: stock
xs = torch.randn(4, 128, 32)
check(F.layer_norm(xs, (32,), w[:32], b[:32], 1e-5), xs, (32,), w[:32], b[:32])  # another shape
xt = torch.randn(4, 64, 128).transpose(1, 2)
check(F.layer_norm(xt, (64,), w, b, 1e-5), xt)            # not contiguous: stock
xg = torch.randn(4, 128, 64, requires_grad=True)
check(F.layer_norm(xg, (64,), w, b, 1e-5).detach(), xg.detach())  # needs grad: stock
print("probe ok")
)";

// Several threads calling the forged kernel at once (each its own row count
// inside the family): every call forged, every result right.
const char* kThreads = R"(import sys, threading, torch, torch.nn.functional as F
torch.manual_seed(3)
w, b = torch.randn(64), torch.randn(64)
bad = []
def work(rows):
    for _ in range(25):
        x = torch.randn(rows, 128, 64)
        y = F.layer_norm(x, (64,), w, b, 1e-5)
        ref = F.layer_norm(x.double(), (64,), w.double(), b.double(), 1e-5)
        if (y.double() - ref).abs().max().item() > 1e-3 * max(1.0, ref.abs().max().item()):
            bad.append(rows)
threads = [threading.Thread(target=work, args=(r,)) for r in (1, 2, 3, 4)]
for t in threads: t.start()
for t in threads: t.join()
if bad:
    print("MISMATCH", bad); sys.exit(1)
print("threads ok")
)";

// A compiled model: Inductor must call the forged kernel for the forged
// signature (policy forced, since which is faster depends on the machine),
// keep its own code for another shape, add no graph break and no recompile.
const char* kCompiled = R"(import sys, torch, torch.nn as nn, torch.nn.functional as F
torch.manual_seed(2)
torch._dynamo.config.error_on_recompile = True
ln = nn.LayerNorm(64)
def fn(t):
    return torch.relu(ln(t)) * 2
f = torch.compile(fn)
x = torch.randn(4, 128, 64)
with torch.no_grad():
    for _ in range(3):
        y = f(x)
    ref = torch.relu(F.layer_norm(x.double(), (64,), ln.weight.double(), ln.bias.double())) * 2
    if (y.double() - ref).abs().max().item() > 1e-4:
        print("MISMATCH"); sys.exit(1)
    g = torch.compile(lambda t: F.layer_norm(t, (32,)))
    g(torch.randn(4, 128, 32))
    if torch._dynamo.explain(fn)(x).graph_break_count != 0:
        print("GRAPH BREAK"); sys.exit(1)
print("compiled ok")
)";

}  // namespace

TEST_CASE("forge run: forged inside the signature family, stock outside, exit code passed on") {
  FORGE_SKIP_WITHOUT_TORCH();
  test::TempDir dir;
  test::write_text(dir / "app.py", kApp);
  test::write_text(dir / "probe.py", kProbe);
  test::write_text(dir / "threads.py", kThreads);
  test::write_text(dir / "forge.yaml",
                   "models:\n  app: {run: python app.py, latency: 'took ([0-9.]+) ms', env: {OMP_NUM_THREADS: '1'}}\n"
                   "targets: {ops: [native_layer_norm], top: 0, min_share: 0}\n"
                   "budget: {iterations: 3}\n");
  auto build = test::run_forge("--json build", dir.path());
  INFO(build.err);
  REQUIRE(build.exit_code == 0);
  json r = json::parse(build.out);
  REQUIRE(r["targets"].size() == 1);
  REQUIRE_MESSAGE(r["targets"][0]["accepted"].get<int>() >= 1, r["targets"].dump());
  const json& pkg = r["package"];
  REQUIRE(pkg["status"] == "ok");
  CHECK(fs::exists(pkg["library"].get<std::string>()));
  // The build's own end-to-end check: the app's 3 calls forged, each matching stock.
  const json& e2e = pkg["models"]["app"];
  CHECK(e2e["status"] == "ok");
  CHECK(e2e["forged_calls"] == 3);
  CHECK(e2e["more_threads_calls"] == 0);  // the model runs with OMP_NUM_THREADS=1
  CHECK(e2e["mismatches"] == 0);
  CHECK(e2e["stock_seconds"].get<double>() > 0);
  CHECK(e2e["amdahl_bound"].get<double>() >= 1.0);
  // models.app.latency: the verdict compares the app's own figure.
  CHECK(e2e["stock_latency"].get<double>() > 0);
  CHECK(e2e["forged_latency"].get<double>() > 0);
  CHECK(e2e["timing"].get<std::string>().find("models.app.latency") != std::string::npos);
  CHECK(e2e["speedup"].get<double>() ==
        doctest::Approx(e2e["stock_latency"].get<double>() / e2e["forged_latency"].get<double>()));
  // Five timed pairs (check_runs' default), stock first in even pairs and
  // forged first in odd ones.
  CHECK(test::read_text(dir / "runs.log") == "SFFSSFFSSF");
  // The verdict `forge run` consults before loading the package.
  json checks = json::parse(test::read_text(dir / ".forge" / "package" / "checks.json"));
  CHECK(checks["digest"] == pkg["digest"]);
  CHECK(checks["models"]["app"]["status"] == "ok");

  // The CPU kernel is single-threaded and beat stock at 1 intra-op thread.
  const fs::path package_json = dir / ".forge" / "package" / "package.json";
  const std::string built = test::read_text(package_json);
  json pj = json::parse(built);
  CHECK(pj["entries"][0]["stock_threads"] == 1);
  // The guard's bound on the varied rows (issue 29): the entry carries the
  // accepted record's verify.vary_max, at least the captured 4 rows. A worker
  // that does not report one yet leaves it out, the build says so, and the
  // guard takes the captured 4 rows only.
  if (pj["entries"][0].contains("vary_max")) {
    CHECK(pj["entries"][0]["vary_max"].size() == 1);
    CHECK(pj["entries"][0]["vary_max"][0].get<long>() >= 4);
    CHECK(r["notes"].dump().find("no verify.vary_max") == std::string::npos);
  } else {
    MESSAGE("the worker reports no verify.vary_max yet: the package entry has none");
    CHECK(r["notes"].dump().find("no verify.vary_max") != std::string::npos);
  }
  // The calls below need one bound whatever this worker verified: the entry
  // says 16 rows, as a record with verify.vary_max [16] would have it packaged.
  pj["entries"][0]["vary_max"] = json::array({16});
  test::write_text(package_json, pj.dump(2) + "\n");
  auto run = test::run_forge("run --json-report report.json -- env OMP_NUM_THREADS=1 python probe.py", dir.path());
  INFO(run.out << run.err);
  CHECK(run.exit_code == 0);
  CHECK(run.out.find("probe ok") != std::string::npos);
  json rep = json::parse(test::read_text(dir / "report.json"));
  REQUIRE(rep["entries"].size() == 1);
  // functional, module, torch.layer_norm, the 7-row and the 16-row calls.
  CHECK(rep["entries"][0]["forged"] == 5);
  CHECK(rep["entries"][0]["kernel_errors"] == 0);
  std::string fallbacks = rep["fallback"].dump();
  CHECK(fallbacks.find("BFloat16") != std::string::npos);
  CHECK(fallbacks.find("{strided}") != std::string::npos);
  CHECK(fallbacks.find("Float[17, 128, 64]") != std::string::npos);  // beyond vary_max
  CHECK(fallbacks.find("Float[16, 128, 64]") == std::string::npos);
  long stock_calls = 0;
  for (const auto& f : rep["fallback"]) stock_calls += f["calls"].get<long>();
  // bf16, 32-wide, transposed, needs grad, 17 rows, and the 9 float64 references.
  CHECK(stock_calls == 5 + 9);
  CHECK(rep["entries"][0]["more_threads"] == 0);

  // With 2 intra-op threads stock may beat the single-threaded kernel: the 5
  // calls forged above go to stock, counted per entry (not among the 5 + 9
  // calls outside the family) and named in the table.
  auto more = test::run_forge("run --json-report more.json -- env OMP_NUM_THREADS=2 python probe.py", dir.path());
  INFO(more.out << more.err);
  CHECK(more.exit_code == 0);
  CHECK(more.out.find("probe ok") != std::string::npos);
  json mrep = json::parse(test::read_text(dir / "more.json"));
  REQUIRE(mrep["entries"].size() == 1);
  CHECK(mrep["entries"][0]["forged"] == 0);
  CHECK(mrep["entries"][0]["more_threads"] == 5);
  long more_stock = 0;
  for (const auto& f : mrep["fallback"]) more_stock += f["calls"].get<long>();
  CHECK(more_stock == 5 + 9);
  CHECK(more.err.find("to stock 5×") != std::string::npos);

  auto threads = test::run_forge("run --json-report threads.json -- env OMP_NUM_THREADS=1 python threads.py", dir.path());
  INFO(threads.out << threads.err);
  CHECK(threads.exit_code == 0);
  CHECK(threads.out.find("threads ok") != std::string::npos);
  json trep = json::parse(test::read_text(dir / "threads.json"));
  REQUIRE(trep["entries"].size() == 1);
  CHECK(trep["entries"][0]["forged"] == 4 * 25);
  CHECK(trep["entries"][0]["kernel_errors"] == 0);

  // An entry packaged without vary_max (a record from before the worker
  // reported it): only the captured 4 rows are forged; 7, 16 and 17 rows go to
  // stock, counted with the other fallbacks.
  pj["entries"][0].erase("vary_max");
  test::write_text(package_json, pj.dump(2) + "\n");
  auto captured = test::run_forge("run --json-report captured.json -- env OMP_NUM_THREADS=1 python probe.py", dir.path());
  INFO(captured.out << captured.err);
  CHECK(captured.exit_code == 0);
  CHECK(captured.out.find("probe ok") != std::string::npos);
  json caprep = json::parse(test::read_text(dir / "captured.json"));
  REQUIRE(caprep["entries"].size() == 1);
  CHECK(caprep["entries"][0]["forged"] == 3);
  const std::string capfallbacks = caprep["fallback"].dump();
  for (const char* rows : {"Float[7, 128, 64]", "Float[16, 128, 64]", "Float[17, 128, 64]"})
    CHECK_MESSAGE(capfallbacks.find(rows) != std::string::npos, rows);
  long cap_stock = 0;
  for (const auto& f : caprep["fallback"]) cap_stock += f["calls"].get<long>();
  CHECK(cap_stock == 5 + 2 + 9);
  // The package as built, for the rest.
  test::write_text(package_json, built);

  // Under torch.compile the decision is recorded per target ...
  CHECK(r["targets"][0]["under_compile"].is_string());
  CHECK(r["targets"][0]["compile_us"].get<double>() > 0);
  // ... and, forced to forge, compiled graphs reach the forged kernel: 3 calls,
  // plus 1 from explain(), which runs fn's ops eagerly (eager calls always do).
  test::write_text(dir / "compiled.py", kCompiled);
  auto compiled = test::run_forge(
      "run --json-report compiled.json -- env FORGE_COMPILE_POLICY=forge OMP_NUM_THREADS=1 python compiled.py", dir.path());
  INFO(compiled.out << compiled.err);
  CHECK(compiled.exit_code == 0);
  CHECK(compiled.out.find("compiled ok") != std::string::npos);
  json crep = json::parse(test::read_text(dir / "compiled.json"));
  REQUIRE(crep["entries"].size() == 1);
  CHECK(crep["entries"][0]["forged"] == 3 + 1);
  // Forced to Inductor, only the eager one.
  auto inductor = test::run_forge(
      "run --json-report inductor.json -- env FORGE_COMPILE_POLICY=inductor OMP_NUM_THREADS=1 python compiled.py",
      dir.path());
  CHECK(inductor.exit_code == 0);
  CHECK(json::parse(test::read_text(dir / "inductor.json"))["entries"][0]["forged"] == 1);

  // Compiled with 2 threads: the graph keeps Inductor's code (a separate
  // Inductor cache entry), and explain()'s eager call goes to stock.
  auto compiled2 = test::run_forge(
      "run --json-report compiled2.json -- env FORGE_COMPILE_POLICY=forge OMP_NUM_THREADS=2 python compiled.py",
      dir.path());
  INFO(compiled2.out << compiled2.err);
  CHECK(compiled2.exit_code == 0);
  json c2rep = json::parse(test::read_text(dir / "compiled2.json"));
  CHECK(c2rep["entries"][0]["forged"] == 0);
  CHECK(c2rep["entries"][0]["more_threads"] == 1);

  auto code = test::run_forge("run -- python -c 'import sys; sys.exit(3)'", dir.path());
  CHECK(code.exit_code == 3);

  // The model's env is part of the check's key: run with 2 threads, the
  // check runs again, forges nothing, says why, and judges no verdict.
  test::write_text(dir / "forge.yaml",
                   "models:\n  app: {run: python app.py, latency: 'took ([0-9.]+) ms', env: {OMP_NUM_THREADS: '2'}}\n"
                   "targets: {ops: [native_layer_norm], top: 0, min_share: 0}\n"
                   "budget: {iterations: 3}\n");
  auto two = test::run_forge("--json build", dir.path());
  INFO(two.out << two.err);
  REQUIRE(two.exit_code == 0);
  json r2 = json::parse(two.out);
  REQUIRE(r2["package"]["models"].contains("app"));
  const json& e2e2 = r2["package"]["models"]["app"];
  CHECK(e2e2["status"] == "ok");
  CHECK(e2e2["forged_calls"] == 0);
  CHECK(e2e2["more_threads_calls"] == 3);
  CHECK(e2e2["fallback_calls"] == 3);
  CHECK(e2e2["slower"] == false);
  CHECK(r2["notes"].dump().find("OMP_NUM_THREADS") != std::string::npos);
}

// Two models calling the same layer_norm. "slow" reports a worse figure
// whenever a forge library is loaded (FORGE_LOAD_LIBS set): what per-call
// overhead did to a host-bound model on the H200 (PERF.md run I). Both print
// whether the library was loaded.
const char* kTwoApps = R"(import os, sys, time, torch, torch.nn as nn
torch.manual_seed(0)
ln = nn.LayerNorm(64)
x = torch.randn(4, 128, 64)
loaded = bool(os.environ.get("FORGE_LOAD_LIBS"))
with torch.no_grad():
    t0 = time.perf_counter()
    for _ in range(3):
        y = ln(x)
ms = (time.perf_counter() - t0) * 1e3 + (50.0 if loaded and sys.argv[1] == "slow" else 0.0)
print(float(y.sum()))
print("loaded: %s" % ("yes" if loaded else "no"))
print("took %.4f ms" % ms)
)";

TEST_CASE("a model slower end to end with its kernels: they are left out, the rest ships, none left: forge run runs plainly") {
  FORGE_SKIP_WITHOUT_TORCH();
  test::TempDir dir;
  test::write_text(dir / "app.py", kTwoApps);
  const std::string slow =
      "  slow: {run: python app.py slow, latency: 'took ([0-9.]+) ms', check_runs: 3, env: {OMP_NUM_THREADS: '1'}}\n";
  const std::string rest = "targets: {ops: [native_layer_norm], top: 0, min_share: 0}\nbudget: {iterations: 3}\n";
  test::write_text(dir / "forge.yaml", "models:\n  fast: {run: python app.py fast, latency: 'took ([0-9.]+) ms', "
                                       "check_runs: 3, env: {OMP_NUM_THREADS: '1'}}\n" + slow + rest);
  auto build = test::run_forge("--json build", dir.path());
  INFO(build.out << build.err);
  REQUIRE(build.exit_code == 0);
  json r = json::parse(build.out);
  REQUIRE(r["targets"].size() == 2);
  for (const auto& t : r["targets"]) REQUIRE_MESSAGE(t["accepted"].get<int>() >= 1, r["targets"].dump());
  const json& pkg = r["package"];
  // Round 1 shipped both kernels and found "slow" slower; round 2 ships fast's.
  CHECK(pkg["status"] == "ok");
  CHECK(pkg["entries"] == 1);
  REQUIRE(pkg.contains("left_out"));
  CHECK(pkg["left_out"].size() == 1);
  CHECK(pkg["left_out"]["slow"]["slower"] == true);
  CHECK(pkg["left_out"]["slow"]["forged_calls"] == 3);
  CHECK(pkg["left_out"]["slow"]["compared_forged"].size() == 3);
  CHECK(pkg["models"]["fast"]["slower"] == false);
  // fast's kernel has slow's signature too: slow is checked again, still slower.
  CHECK(pkg["models"]["slow"]["slower"] == true);
  CHECK(pkg["models"]["slow"]["forged_calls"] == 3);
  const std::string notes = r["notes"].dump();
  CHECK(notes.find("slow ran slower with its forged kernels loaded") != std::string::npos);
  CHECK(notes.find("slow still ran slower with the package") != std::string::npos);
  const fs::path package = dir / ".forge" / "package";
  REQUIRE(fs::exists(package / "libforge.so"));
  json checks = json::parse(test::read_text(package / "checks.json"));
  CHECK(checks["digest"] == pkg["digest"]);
  CHECK(checks["models"]["fast"]["status"] == "ok");
  CHECK(json::parse(test::read_text(package / "package.json"))["entries"].size() == 1);

  // Unchanged: nothing reruns, and the package folder is not replaced.
  const auto stamp = fs::last_write_time(package / "digest");
  auto again = test::run_forge("--json build", dir.path());
  REQUIRE(again.exit_code == 0);
  json r2 = json::parse(again.out);
  CHECK(r2["steps_run"] == 0);
  CHECK(r2["package"]["digest"] == pkg["digest"]);
  CHECK(r2["package"]["left_out"]["slow"]["slower"] == true);
  CHECK(fs::last_write_time(package / "digest") == stamp);

  // Only "slow" left: its kernel goes too, and no library remains.
  test::write_text(dir / "forge.yaml", "models:\n" + slow + rest);
  auto alone = test::run_forge("--json build", dir.path());
  INFO(alone.out << alone.err);
  REQUIRE(alone.exit_code == 0);
  json r3 = json::parse(alone.out);
  CHECK(r3["package"]["status"] == "empty");
  CHECK(r3["package"]["left_out"]["slow"]["slower"] == true);
  CHECK_FALSE(fs::exists(package / "libforge.so"));
  CHECK(test::read_text(package / "none").find("ran slower") != std::string::npos);
  // forge run: the command runs without the library, and says why.
  auto run = test::run_forge("run -- python app.py slow", dir.path());
  CHECK(run.exit_code == 0);
  CHECK(run.err.find("no package: every model with a forged kernel ran slower") != std::string::npos);
  CHECK(run.out.find("loaded: no") != std::string::npos);
}

// Two models running the same cumsum and cumprod. "app" runs them alone and
// has both targets; in "other" a matrix product takes most of the op time, so
// its own scan targets are below min_share and unforged, yet app's kernels and
// routes reach its calls (they match by the call's arguments). Under
// OTHER_COMPILE=1 the scans run compiled, and other reports 50 ms more when
// forge routes cumprod into compiled graphs: what a routed kernel that splits Inductor's fusion does to a compiled model
// (PERF.md, the GroupNorm -> SiLU module). On the CPU Inductor's scans are
// slower than stock's, so the op comparison routes both kernels. Run eagerly
// both models report a fixed figure: the hot scans are as fast with the
// kernels as without, and this test is not about the eager verdict (a tie is
// never "slower").
const char* kScansApp = R"(import os, time, torch
compiled = os.environ.get("OTHER_COMPILE") == "1"
def scans(t, u):
    return torch.cumsum(t, dim=1), torch.cumprod(u, dim=1)
f = torch.compile(scans) if compiled else scans
torch.manual_seed(0)
x = torch.randn(64, 4096)
u = torch.rand(64, 4096) * 0.2 + 0.9
if os.environ.get("APP_MM") == "1":
    a = torch.randn(1280, 1280)
    float((a @ a).sum())
y, z = f(x, u)
t0 = time.perf_counter()
for _ in range(3):
    y, z = f(x, u)
ms = (time.perf_counter() - t0) * 1e3 if compiled else 1.0
def routed(op):  # forge_compile.py defines forge::<op> for each op it routes
    try:
        getattr(torch.ops.forge, op)
        return True
    except (AttributeError, RuntimeError):
        return False
if compiled and routed("cumprod"):
    ms += 50.0
print(float(y.sum()) + float(z.sum()))
print("took %.4f ms" % ms)
)";

TEST_CASE("compile_env: a compiled run slower with the routes that reach it turns off the one that costs it") {
  FORGE_SKIP_WITHOUT_TORCH();
  test::TempDir dir;
  test::write_text(dir / "app.py", kScansApp);
  test::write_text(dir / "forge.yaml",
                   "models:\n"
                   "  app: {run: python app.py, latency: 'took ([0-9.]+) ms', check_runs: 1, "
                   "env: {OMP_NUM_THREADS: '1'}}\n"
                   "  other: {run: python app.py, latency: 'took ([0-9.]+) ms', check_runs: 3, "
                   "env: {OMP_NUM_THREADS: '1', APP_MM: '1'}, compile_env: {OTHER_COMPILE: '1'}}\n"
                   "targets: {ops: [cumsum, cumprod], top: 0, min_share: 0.1, chains: 0}\nbudget: {iterations: 2}\n");
  auto build = test::run_forge("--json build", dir.path());
  INFO(build.out << build.err);
  REQUIRE(build.exit_code == 0);
  json r = json::parse(build.out);
  // Only app's scans are searched: other's are 1-2% of its op time (the matrix
  // product's), app's 30-40% of its own. min_share 10% leaves either side a
  // margin of 3x or more against stalls in a loaded machine's captures (at 3%
  // one of other's scans can cross it and be packaged as a third entry).
  REQUIRE_MESSAGE(r["targets"].size() == 2, r["targets"].dump());
  const bool sum_first = r["targets"][0]["op"] == "cumsum";
  const json& cumsum = r["targets"][sum_first ? 0 : 1];
  const json& cumprod = r["targets"][sum_first ? 1 : 0];
  REQUIRE(cumsum["model"] == "app");
  REQUIRE(cumprod["op"] == "cumprod");
  for (const json* t : {&cumsum, &cumprod}) REQUIRE_MESSAGE((*t)["accepted"].get<int>() >= 1, r["targets"].dump());
  const json& pkg = r["package"];
  // The eager verdicts keep both kernels. "other" has none of its own and is
  // checked because app's reach its calls.
  CHECK(pkg["status"] == "ok");
  CHECK(pkg["entries"] == 2);
  CHECK(pkg["models"]["app"]["slower"] == false);
  REQUIRE(pkg["models"].contains("other"));
  CHECK(pkg["models"]["other"]["forged_calls"].get<long>() >= 8);
  // other's compiled run with both routes was slower; timed one route at a
  // time, only cumprod's was, so only it goes (the deciding check is kept
  // under routes_off), and the package checked after it still routes cumsum:
  // other's compiled run with it is not slower.
  REQUIRE_MESSAGE(pkg.contains("routes_off"), "no compiled check (the op comparison routed nothing?): " << r.dump());
  REQUIRE_MESSAGE(pkg["routes_off"]["other"].size() == 1, pkg["routes_off"].dump());
  const json& c = pkg["routes_off"]["other"][0];
  CHECK(c["status"] == "ok");
  CHECK(c["forged_calls"].get<long>() >= 6);
  CHECK(c["mismatches"] == 0);
  CHECK(c["compared_forged"].size() == 3);
  CHECK(c["slower"] == true);
  REQUIRE(c["per_route"].size() == 2);
  for (const auto& row : c["per_route"]) {
    CHECK(row["status"] == "ok");
    CHECK(row["compared_stock"].size() == 3);
    const bool is_cumprod = row["target"] == cumprod["id"];
    CHECK_MESSAGE((row["speedup"].get<double>() < 0.5) == is_cumprod, row.dump());
  }
  CHECK(c["turned_off"] == json::array({cumprod["id"]}));
  CHECK(pkg["models"]["other"]["compiled"]["slower"] == false);
  CHECK_FALSE(pkg["models"]["other"]["compiled"].contains("per_route"));
  // The compiled run called torch.compile; the eager runs did not, so their
  // checks of the first package (both routes) stand for the last one, which
  // differs only in routing: not rerun.
  CHECK(pkg["models"]["other"]["compiled"]["torch_compile"] == true);
  for (const char* m : {"app", "other"}) {
    CHECK(pkg["models"][m]["torch_compile"] == false);
    CHECK_MESSAGE(pkg["models"][m]["checked_package"] != pkg["digest"], m);
  }
  const std::string notes = r["notes"].dump();
  CHECK(notes.find("other ran slower under torch.compile with forge's routes into compiled graphs") !=
        std::string::npos);
  CHECK(notes.find("timed one route at a time: compiled graphs keep Inductor's code for " +
                   cumprod["id"].get<std::string>()) != std::string::npos);
  CHECK(cumprod["under_compile"] == "inductor");
  REQUIRE(cumprod["under_compile_why"].is_string());
  CHECK(cumprod["under_compile_why"].get<std::string>().find("models.other's compiled run was slower") == 0);
  CHECK(cumsum["under_compile"] == "forge");
  const json entries = json::parse(test::read_text(dir / ".forge" / "package" / "package.json"))["entries"];
  REQUIRE(entries.size() == 2);
  for (const auto& e : entries) CHECK(e["under_compile"] == (e["op"] == "aten::cumprod" ? "inductor" : "forge"));

  // Unchanged: nothing reruns, the same package and verdict from the cached checks.
  auto again = test::run_forge("--json build", dir.path());
  REQUIRE(again.exit_code == 0);
  json r2 = json::parse(again.out);
  CHECK(r2["steps_run"] == 0);
  CHECK(r2["package"]["digest"] == pkg["digest"]);
  CHECK(r2["package"]["routes_off"]["other"][0]["turned_off"] == json::array({cumprod["id"]}));

  // A compiled run that fails with the routes confirms none: every route that
  // reaches the model goes, the build succeeds and the eager kernels still ship.
  test::write_text(dir / "app.py",
                   std::string(kScansApp) + "if compiled and (routed('cumsum') or routed('cumprod')):\n"
                                            "    raise SystemExit(3)\n");
  auto broken = test::run_forge("--json build", dir.path());
  INFO(broken.out << broken.err);
  REQUIRE(broken.exit_code == 0);
  json r3 = json::parse(broken.out);
  CHECK(r3["ok"] == true);
  CHECK(r3["package"]["status"] == "ok");
  CHECK(r3["package"]["entries"] == 2);
  REQUIRE(r3["package"]["routes_off"]["other"].size() == 1);
  const json& c3 = r3["package"]["routes_off"]["other"][0];
  CHECK(c3["failed"] == true);
  CHECK(c3["reason"].get<std::string>().find("exit code 3") != std::string::npos);
  CHECK_FALSE(c3.contains("per_route"));
  CHECK(c3["turned_off"].size() == 2);
  for (const auto& t : r3["targets"]) {
    CHECK(t["under_compile"] == "inductor");
    CHECK(t["under_compile_why"] == "models.other's compiled run failed with forge's routes");
  }
  CHECK(r3["notes"].dump().find("other's compiled run (compile_env) failed with forge's routes") != std::string::npos);
}

TEST_CASE("forge run without a package says to build first") {
  test::TempDir dir;
  test::write_text(dir / "forge.yaml", "models:\n  app: {run: python app.py}\n");
  auto r = test::run_forge("run -- true", dir.path());
  CHECK(r.exit_code != 0);
  CHECK(r.err.find("forge build") != std::string::npos);
}

TEST_SUITE_END();
}  // namespace forge
