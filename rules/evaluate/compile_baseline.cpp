#include "rules/evaluate/compile_baseline.h"

#include "engine/environment.h"
#include "engine/store_json.h"
#include "rules/capture/chains.h"
#include "rules/evaluate/evaluate.h"
#include "util/atomic_file.h"
#include "util/hash.h"

namespace forge {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

json measure(BuildContext& ctx, const Target& t, const std::vector<std::string>& modes, WorkerProcess& helper) {
  const auto dot = t.op.find('.');
  json req = {{"op", t.op.substr(0, dot)},
              {"overload", dot == std::string::npos ? "" : t.op.substr(dot + 1)},
              {"args", t.args},
              {"samples", materialize_samples(ctx, t)},
              {"bench", bench_settings(ctx, EvalSettings{})},
              {"modes", modes}};
  // A chain: the helper runs its ATen ops one by one, which Inductor fuses.
  if (t.chain.is_object()) req["chain"] = t.chain;
  // Inductor's first compile on a small CPU machine takes minutes.
  const WorkerReply reply = helper.request(req, 900);
  json rec = helper_record(reply);
  // A target the helper failed on, in any mode, may have left it unhealthy (a
  // CUDA error is sticky): the next target starts a fresh process.
  bool failed = !record_ok(rec) || !rec.value("ok", false);
  const json timed = rec.value("modes", json::object());  // items() must not outlive it
  for (const auto& [mode, r] : timed.items()) failed = failed || r.contains("error");
  if (failed) helper.stop();
  return rec;
}

// The helper's command (its --serve mode): one process for the build's
// targets, since the bench settings, and so its environment, are the build's.
WorkerCommand helper_command(BuildContext& ctx, const fs::path& script) {
  WorkerCommand c;
  c.argv = {ctx.toolchain.python, script.string(), "--serve"};
  c.env["PATH"] = forge_path_env();
  // Inductor's CPU code runs OpenMP regions sized by OMP_NUM_THREADS, not by
  // torch.set_num_threads: pin it like the stock kernel (bench_settings).
  const json bench = bench_settings(ctx, EvalSettings{});
  if (bench.contains("threads")) c.env["OMP_NUM_THREADS"] = std::to_string(bench["threads"].get<int>());
  c.log = ctx.manifest.store / "build" / "compile_bench.log";
  fs::create_directories(c.log.parent_path());
  return c;
}

}  // namespace

// The modes Inductor is timed in. On the CPU, max-autotune changes only GEMM
// and convolution templates: for other ops both modes generate the same C++
// (torch 2.14, docs/PACKAGE.md), so a second mode would time the same code
// again. A GEMM or convolution among the target's ops keeps both.
std::vector<std::string> baseline_modes(const std::string& backend, const Target& t) {
  if (backend != "cpu") return {"default", "max-autotune-no-cudagraphs"};
  std::vector<std::string> names = {t.op};
  if (t.chain.is_object())
    for (const auto& o : t.chain.value("ops", json::array())) names.push_back(o.value("op", ""));
  for (const auto& n : names)
    if (is_gemm_or_conv(n.rfind("aten::", 0) == 0 ? n.substr(6) : n)) return {"default", "max-autotune-no-cudagraphs"};
  return {"default"};
}

json helper_record(const WorkerReply& r) {
  // Inductor compiling past the helper's time limit is a finding about it too:
  // recorded, so the next build does not wait as long again.
  if (r.status == WorkerReply::Status::Timeout)
    return {{"status", "ok"}, {"ok", false}, {"error", "torch.compile timed out after " +
                                                         std::to_string(static_cast<int>(r.seconds)) + " s"}};
  if (!r.ok()) return failed_record("the torch.compile baseline helper: " + r.reason, r.detail);
  if (r.value.contains("error") || !r.value.value("result", json()).is_object())
    return failed_record("the torch.compile baseline failed", r.value.value("error", r.value.dump()));
  json out = r.value["result"];
  out["status"] = "ok";
  if (!out.value("ok", false)) out["error"] = out.value("error", "torch.compile failed");
  return out;
}

void CompileBaselineRule::apply(BuildContext& ctx) {
  const fs::path script =
      fs::path(FORGE_SOURCE_DIR) / "runtime" / "compile_bench" / "forge_compile_bench.py";
  std::string script_text;
  read_file(script, &script_text);
  std::vector<Target*> all;
  for (auto& t : ctx.targets) all.push_back(&t);
  for (auto& t : ctx.chain_targets) all.push_back(&t);  // Inductor's fusion of the same chain
  WorkerProcess helper(helper_command(ctx, script));  // started by the first step that runs
  for (Target* tp : all) {
    Target& t = *tp;
    if (t.kernels.empty()) continue;  // the baseline is for comparing a forged kernel
    const std::vector<std::string> modes = baseline_modes(ctx.device.backend, t);
    StepSpec spec;
    spec.kind = "compile_baseline";
    spec.label = t.id;
    spec.name = "compile_baseline/" + t.id;
    spec.inputs = {{"op", t.op},  // a chain's names its definition's digest
                   {"signature", t.signature},
                   {"args", sha256_hex(t.args.dump())},
                   {"samples", sha256_hex(t.sample_inputs.dump())},
                   {"bench", bench_settings(ctx, EvalSettings{}).dump()},
                   {"device", ctx.device.fingerprint()},
                   {"toolchain", ctx.toolchain.fingerprint()},
                   {"helper", sha256_hex(script_text)},
                   {"modes", json(modes).dump()}};
    spec.run = [&ctx, &t, modes, &helper] { return measure(ctx, t, modes, helper); };
    auto outcome = ctx.step(spec, t.model);
    if (!outcome) continue;
    const json& rec = outcome->record;
    if (!record_ok(rec)) {
      ctx.notes.push_back("torch.compile baseline of " + t.id + ": " + rec.value("reason", ""));
      continue;
    }
    // The spellings compiled graphs may use for this op, found by tracing it;
    // one that cannot be mapped onto the op leaves those graphs on Inductor's code.
    t.traced_as = rec.value("traced_as", json::array());
    if (rec.contains("traced_as_problem"))
      ctx.notes.push_back("torch.compile spelling of " + t.id + ": " + rec["traced_as_problem"].get<std::string>() +
                          "; compiled graphs that spell it so keep Inductor's code");
    if (!rec.contains("compile_us")) {
      ctx.notes.push_back("torch.compile baseline of " + t.id + ": Inductor compiled the op in no mode (" +
                          rec.value("error", "") + "); no compile figure for it");
      continue;
    }
    t.compile_us = rec["compile_us"].value("median", 0.0);
    t.compile_mode = rec.value("best_mode", "");
    // The helper calls both eager and compiled from Python, so its absolute
    // times carry the interpreter's call overhead; its ratio does not. Inductor
    // over stock (same process, same method) times stock over the kernel (the
    // worker) is the kernel's speedup over Inductor. Relative spreads add up.
    const json& ch = rec["compile_us"];
    const json& eh = rec["eager_us"];
    const double c_med = ch.value("median", 0.0), e_med = eh.value("median", 0.0);
    if (c_med <= 0 || e_med <= 0) continue;
    t.compile_over_eager = c_med / e_med;
    // The kernel the package ships (Target::shipped) is the one compared.
    if (!t.shipped) continue;
    const json ev = get_json_object(ctx.builder.store(), t.kernels[*t.shipped].evaluation);
    if (!ev.is_object()) continue;
    const json b = ev.value("bench", json::object());
    const double best = b.value("speedup_eager", 0.0);
    const json c = b.value("candidate_us", json::object());
    const json e = b.value("eager_us", json::object());
    if (best <= 0 || c.value("median", 0.0) <= 0 || e.value("median", 0.0) <= 0) continue;
    const double best_rel = c.value("spread", 0.0) / c["median"].get<double>() +
                            e.value("spread", 0.0) / e["median"].get<double>();
    t.best_speedup_compile = best * *t.compile_over_eager;
    const double rel = best_rel + ch.value("spread", 0.0) / c_med + eh.value("spread", 0.0) / e_med;
    // The two figures come from different processes, so no rounds pair up:
    // forge is ahead when its gain exceeds the relative spreads added up.
    t.under_compile = *t.best_speedup_compile - 1 > rel ? "forge" : "inductor";
  }
}

}  // namespace forge
