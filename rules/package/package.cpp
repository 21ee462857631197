#include "rules/package/package.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <regex>
#include <set>

#include "engine/store_json.h"
#include "rules/evaluate/compile.h"
#include "rules/evaluate/family.h"
#include "rules/improvement.h"
#include "rules/capture/model_command.h"
#include "rules/capture/runtime_build.h"
#include "runtime/common/signature_family.h"
#include "util/atomic_file.h"
#include "util/hash.h"

namespace forge {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The kernel a target ships (Target::shipped: the tip of its improvement chain,
// rules/improvement.h), with its evaluation record.
const KernelRecord* shipped_kernel(BuildContext& ctx, const Target& t, json* evaluation) {
  if (!t.shipped) return nullptr;
  *evaluation = get_json_object(ctx.builder.store(), t.kernels[*t.shipped].evaluation);
  return evaluation->is_object() ? &t.kernels[*t.shipped] : nullptr;
}

// One package.json entry, or null with a note when the target cannot ship.
json package_entry(BuildContext& ctx, const Target& t, const std::vector<Family>& families,
                   const fs::path& kernels_dir) {
  json rec;
  const KernelRecord* k = shipped_kernel(ctx, t, &rec);
  if (!k) return nullptr;
  auto family = find_family(families, t.op);
  const std::string so = rec.value("compile", json::object()).value("so", "");
  if (!family || so.empty()) {
    ctx.notes.push_back("package: " + t.id + " has no family or compiled kernel; not packaged");
    return nullptr;
  }
  if (materialize_object(ctx.builder.store(), so, kernels_dir, ".so").empty()) {
    ctx.notes.push_back("package: the kernel of " + t.id + " is missing from the store");
    return nullptr;
  }
  const auto dot = t.op.find('.');
  json entry = {{"target", t.id},
               {"op", "aten::" + t.op.substr(0, dot)},
               {"overload", dot == std::string::npos ? "" : t.op.substr(dot + 1)},
               {"signature", t.signature},
               {"args", t.args},
               {"outputs", t.outputs},
               {"family", family->spec},
               {"kernel", "kernels/" + so + ".so"},
               {"strategy", k->strategy + " " + k->params.dump()},
               {"iteration", k->iteration},
               {"speedup_eager", rec["bench"].value("speedup_eager", 0.0)},
               {"speedup_compile", t.best_speedup_compile ? json(*t.best_speedup_compile) : json(nullptr)},
               // Compiled graphs call the forged kernel only where it beat Inductor
               // (runtime/autoload/forge_autoload/compile.py reads this).
               {"under_compile", t.under_compile.empty() ? "inductor" : t.under_compile}};
  // The signature family the guard applies (vary, pins, contiguous,
  // vary_outputs: runtime/common/signature_family.h), validated when the
  // family file loaded.
  entry.update(family::to_json<json>(family::parse(family->spec.value("signature_family", json::object()))));
  // CPU kernels are single-threaded and were timed against stock running
  // bench.threads intra-op threads: the guard takes them only in processes
  // that give stock no more threads than that (docs/PACKAGE.md).
  if (ctx.device.backend == "cpu" && rec["bench"].value("threads", 0) > 0)
    entry["stock_threads"] = rec["bench"]["threads"];
  // The largest varied extents the worker verified: the guard takes no larger
  // call, and without them only the captured extent (runtime/common/signature_family.h).
  std::string problem;
  json vary_max = package_vary_max(rec.value("verify", json::object()), entry["vary"], &problem);
  if (!vary_max.is_null()) entry["vary_max"] = std::move(vary_max);
  else if (!problem.empty()) {
    const std::string note = "package: " + t.id + ": " + problem + "; its kernel is used for the captured extent only";
    if (std::find(ctx.notes.begin(), ctx.notes.end(), note) == ctx.notes.end())  // once, not per round
      ctx.notes.push_back(note);
  }
  return entry;
}

// Replaces `dir` by `staged` so a reader never sees half a package.
void swap_in(const fs::path& staged, const fs::path& dir) {
  const fs::path old = dir.string() + ".old-" + std::to_string(::getpid());
  std::error_code ec;
  if (fs::exists(dir)) fs::rename(dir, old);
  fs::rename(staged, dir);
  fs::remove_all(old, ec);
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The end-to-end check of one model (a cached step: package digest x model).
json end_to_end(BuildContext& ctx, const ModelSpec& m, const RuntimeLibs& rt,
                const fs::path& lib, int runs) {
  const fs::path reports = ctx.manifest.store / "tmp" / ("e2e-" + m.name + "-" + std::to_string(::getpid()));
  std::error_code ec;
  fs::remove_all(reports, ec);
  fs::create_directories(reports);
  const double timeout = ctx.manifest.capture.timeout_seconds;
  auto run = [&](bool forged, bool check) {
    Command c = model_command(m, rt, forged ? std::vector<std::string>{lib.string()}
                                            : std::vector<std::string>{});
    if (check) {
      c.env["FORGE_PACKAGE_CHECK"] = "1";
      c.env["FORGE_PACKAGE_REPORT"] = reports.string();
    }
    c.timeout_seconds = timeout;
    return ctx.runner.run(c);
  };
  // 1. Correctness: every forged call also run by stock and compared.
  CommandResult r = run(true, true);
  if (!r.ok()) {
    fs::remove_all(reports, ec);
    return failed_record("`" + m.run + "` with libforge.so loaded " + r.describe(),
                         r.err.size() > 2000 ? r.err.substr(r.err.size() - 2000) : r.err);
  }
  json merged = merge_package_reports(reports);
  fs::remove_all(reports, ec);
  // 2. Latency: `runs` timed pairs of the whole command, stock first in even
  // pairs and forged first in odd ones, so drift between back-to-back
  // processes is not charged to one side (docs/PERF.md, run K). With
  // `latency`, also the model's own figure from its stdout (last match).
  std::vector<double> stock, forged, stock_own, forged_own;
  const std::optional<std::regex> pattern =
      m.latency.empty() ? std::nullopt : std::optional<std::regex>(std::regex(m.latency));
  for (int i = 0; i < runs; ++i) {
    for (bool f : {i % 2 == 1, i % 2 == 0}) {
      CommandResult t = run(f, false);
      if (!t.ok()) return failed_record("`" + m.run + "` " + t.describe() + " in a timed run");
      (f ? forged : stock).push_back(t.seconds);
      if (!pattern) continue;
      std::optional<double> figure;
      for (auto it = std::sregex_iterator(t.out.begin(), t.out.end(), *pattern);
           it != std::sregex_iterator(); ++it)
        figure = std::strtod((*it)[1].str().c_str(), nullptr);
      if (!figure || !(*figure > 0))
        return failed_record("no positive number matched the latency pattern '" + m.latency +
                                 "' in the output of `" + m.run + "`",
                             t.out.size() > 2000 ? t.out.substr(t.out.size() - 2000) : t.out);
      (f ? forged_own : stock_own).push_back(*figure);
    }
  }
  // What the verdict compares: the model's own figures when it reports them.
  const std::vector<double>& cmp_stock = pattern ? stock_own : stock;
  const std::vector<double>& cmp_forged = pattern ? forged_own : forged;
  long forged_calls = 0, mismatches = 0, fallback_calls = 0, more_threads = 0;
  double worst_tol = 0;
  for (const auto& e : merged["entries"]) {
    forged_calls += e.value("forged", 0L);
    more_threads += e.value("more_threads", 0L);
    mismatches += e.value("mismatches", 0L);
    worst_tol = std::max(worst_tol, e.value("worst_tol", 0.0));
  }
  for (const auto& f : merged["fallback"]) fallback_calls += f.value("calls", 0L);
  fallback_calls += more_threads;
  json out = {{"status", mismatches == 0 ? "ok" : "failed"},
              {"forged_calls", forged_calls},
              {"fallback_calls", fallback_calls},
              // of those, calls inside a CPU kernel's family that went to stock
              // because the process ran torch with more threads (override.cpp)
              {"more_threads_calls", more_threads},
              {"mismatches", mismatches},
              {"worst_tol", worst_tol},
              {"runs", runs},
              {"stock_seconds", median(stock)},
              {"forged_seconds", median(forged)},
              {"stock_range", {*std::min_element(stock.begin(), stock.end()), *std::max_element(stock.begin(), stock.end())}},
              {"forged_range", {*std::min_element(forged.begin(), forged.end()), *std::max_element(forged.begin(), forged.end())}},
              {"speedup", median(cmp_forged) > 0 ? median(cmp_stock) / median(cmp_forged) : 0.0},
              // Faster only when every forged run beat every stock run: whole-command
              // times include interpreter start-up and vary by tens of percent.
              {"significant", *std::max_element(cmp_forged.begin(), cmp_forged.end()) <
                                  *std::min_element(cmp_stock.begin(), cmp_stock.end())},
              // The compared figures themselves: PackageRule judges "slower"
              // from them (ran_slower) each build, not once with this record.
              {"compared_stock", cmp_stock},
              {"compared_forged", cmp_forged},
              {"timing", pattern ? "the model's own figure (models." + m.name +
                                       ".latency), medians of alternating runs"
                                 : std::string("wall time of the whole command, medians of alternating runs")},
              {"calls", merged}};
  if (pattern) {
    out["stock_latency"] = median(stock_own);
    out["forged_latency"] = median(forged_own);
  }
  if (mismatches) out["reason"] = "forged outputs differ from stock in the model run";
  return out;
}

}  // namespace

fs::path package_dir(const Manifest& manifest) { return manifest.store / "package"; }

json package_vary_max(const json& verify, const json& vary, std::string* problem) {
  if (problem) problem->clear();
  if (!vary.is_array() || vary.empty()) return nullptr;  // nothing varies: nothing to bound
  if (!verify.is_object() || !verify.contains("vary_max")) {
    if (problem) *problem = "its evaluation record has no verify.vary_max (verified before the worker reported it)";
    return nullptr;
  }
  const std::string why = family::vary_max_problem(verify["vary_max"], vary.size());
  if (!why.empty()) {
    if (problem) *problem = "its evaluation record's verify." + why;
    return nullptr;
  }
  return verify["vary_max"];
}

json merge_package_reports(const fs::path& dir) {
  std::map<std::string, json> entries;
  std::map<std::pair<std::string, std::string>, long> fallback;
  std::error_code ec;
  for (const auto& f : fs::directory_iterator(dir, ec)) {
    std::string text;
    if (!read_file(f.path(), &text)) continue;
    json r = json::parse(text, nullptr, false);
    if (!r.is_object()) continue;
    for (const auto& e : r.value("entries", json::array())) {
      json& m = entries[e.value("target", "")];
      if (m.is_null()) {
        m = e;
        continue;
      }
      for (const char* k : {"forged", "kernel_errors", "checked", "mismatches", "more_threads"})
        m[k] = m.value(k, 0L) + e.value(k, 0L);
      m["worst_tol"] = std::max(m.value("worst_tol", 0.0), e.value("worst_tol", 0.0));
    }
    for (const auto& e : r.value("fallback", json::array()))
      fallback[{e.value("op", ""), e.value("signature", "")}] += e.value("calls", 0L);
  }
  json out = {{"entries", json::array()}, {"fallback", json::array()}};
  for (auto& [_, e] : entries) out["entries"].push_back(e);
  for (const auto& [k, n] : fallback)
    out["fallback"].push_back({{"op", k.first}, {"signature", k.second}, {"calls", n}});
  return out;
}

bool ran_slower(const std::vector<double>& stock, const std::vector<double>& forged) {
  if (stock.size() < kMinSlowerRuns || forged.size() < kMinSlowerRuns) return false;
  const bool every = *std::min_element(forged.begin(), forged.end()) > *std::max_element(stock.begin(), stock.end());
  return every && median(forged) > 0 && median(stock) / median(forged) < 0.99;
}

namespace {

// No call forged because the thread count held every one back (kernels that
// failed every call do not count: each such call paid for them).
bool held_back(const json& rec) {
  return rec.value("forged_calls", 0L) == 0 && rec.value("more_threads_calls", 0L) > 0;
}

// The verdict from a check record's compared runs, judged now (not cached
// with the record, so a change of rule applies to old records too).
bool record_slower(const json& rec) {
  auto runs = [&](const char* key) {
    std::vector<double> v;
    for (const auto& x : rec.value(key, json::array()))
      if (x.is_number()) v.push_back(x.get<double>());
    return v;
  };
  // Held back, the runs compared stock with stock: nothing to judge.
  return record_ok(rec) && !held_back(rec) && ran_slower(runs("compared_stock"), runs("compared_forged"));
}

// One round: the package of every forged target of a model not left out,
// written into `staged` (or, when the package in `dir` is this very one, left
// there), and the end-to-end check of every model it can touch: those with a
// forged target, and the left-out ones (other models' kernels may override
// the same ops).
struct Round {
  bool empty = true;
  std::string digest;
  fs::path lib;  // the library the checks ran with
  json checks = json::object();
  std::set<std::string> slower;  // checked models found slower, left-out ones included
  bool failed = false;           // a check of this round failed
};

Round package_round(BuildContext& ctx, const std::set<std::string>& left_out, const fs::path& staged) {
  Round round;
  const fs::path dir = package_dir(ctx.manifest);
  std::error_code ec;
  fs::remove_all(staged, ec);
  fs::create_directories(staged / "kernels");

  const auto families = load_families(default_targets_dir());
  json entries = json::array();
  std::map<std::string, std::vector<const Target*>> forged_by_model;
  for (const auto& t : ctx.targets) {
    if (t.kernels.empty() || left_out.count(t.model)) continue;
    json e = package_entry(ctx, t, families, staged / "kernels");
    if (e.is_null()) continue;
    entries.push_back(std::move(e));
    forged_by_model[t.model].push_back(&t);
  }
  if (entries.empty()) return round;
  round.empty = false;
  auto rt = ensure_runtime(ctx, /*with_worker=*/true);
  if (!rt || rt->package_lib.empty()) {
    ctx.failed = round.failed = true;
    ctx.notes.push_back("package: libforge.so is not built (see the worker's build above)");
    return round;
  }
  const json pkg = {{"version", 1},
                    {"backend", ctx.device.backend},
                    {"torch", ctx.toolchain.torch_version},
                    {"entries", entries}};
  Hasher h;
  std::string compile_py;
  read_file(fs::path(FORGE_SOURCE_DIR) / "runtime" / "autoload" / "forge_autoload" / "compile.py", &compile_py);
  h.add("package", pkg.dump()).add("lib", rt->worker_digest).add("compile_py", compile_py);
  round.digest = h.hex();
  // An unchanged package is left in place (a running `forge run` keeps its
  // files); any other is checked where it is staged, and swapped in once,
  // after the last round (PackageRule::apply).
  std::string current;
  if (read_file(dir / "digest", &current) && current == round.digest) {
    round.lib = dir / "libforge.so";
  } else {
    fs::copy_file(rt->package_lib, staged / "libforge.so", fs::copy_options::overwrite_existing);
    // For programs that load the library themselves: `import forge_compile` (docs/PACKAGE.md).
    fs::copy_file(fs::path(FORGE_SOURCE_DIR) / "runtime" / "autoload" / "forge_autoload" / "compile.py",
                  staged / "forge_compile.py", fs::copy_options::overwrite_existing);
    write_file_atomic(staged / "package.json", pkg.dump(2) + "\n");
    write_file_atomic(staged / "digest", round.digest);
    round.lib = staged / "libforge.so";
  }
  ctx.package = {{"status", "ok"}, {"library", (dir / "libforge.so").string()}, {"entries", entries.size()},
                 {"digest", round.digest}, {"models", json::object()}};

  // End to end, per model. The verdicts also go to checks.json beside the
  // library, for `forge run` (failed_package_check).
  round.checks = {{"digest", round.digest}, {"models", json::object()}};
  for (const auto& m : ctx.manifest.models) {
    auto it = forged_by_model.find(m.name);
    if (it == forged_by_model.end() && !left_out.count(m.name)) continue;
    // Amdahl from capture: the bound if each forged op ran at its measured speedup.
    double saved = 0;
    if (it != forged_by_model.end())
      for (const Target* t : it->second)
        if (t->best_speedup_eager && *t->best_speedup_eager > 0)
          saved += t->share * (1 - 1 / *t->best_speedup_eager);
    const int runs = m.check_runs;
    StepSpec spec;
    spec.kind = "e2e";
    spec.label = m.name;
    spec.name = "e2e/" + m.name;
    spec.inputs = {{"package", round.digest},
                   {"command", m.run.empty() ? "torchscript" : m.run},
                   // Relative to forge.yaml: clones in other places share through a cache.
                   {"workdir", fs::relative(m.workdir, ctx.manifest.dir).generic_string()},
                   {"files", named_files_digest(m)},
                   {"env", model_env_digest(m, /*threads=*/true)},
                   {"latency", m.latency},
                   {"order", "pairs-alternate"},  // invalidates checks timed stock-first
                   {"device", ctx.device.fingerprint()},
                   {"toolchain", ctx.toolchain.fingerprint()},
                   {"runs", std::to_string(runs)}};
    spec.cache_failures = true;
    const fs::path lib = round.lib;
    spec.run = [&ctx, &m, &rt, lib, runs] { return end_to_end(ctx, m, *rt, lib, runs); };
    auto outcome = ctx.step(spec, m.name);
    if (!outcome) continue;
    json rec = outcome->record;
    rec["amdahl_bound"] = saved < 1 ? 1 / (1 - saved) : 0.0;
    rec["slower"] = record_slower(rec);
    if (!record_ok(rec)) {
      ctx.failed = round.failed = true;
      ctx.notes.push_back("package: end-to-end check of " + m.name + " failed: " + rec.value("reason", ""));
    }
    if (rec["slower"].get<bool>()) round.slower.insert(m.name);
    if (held_back(rec)) {
      const std::string note = "package: " + m.name +
                               " ran torch with more intra-op threads than its CPU kernels were measured against, "
                               "so none of their calls was forged; `env: {OMP_NUM_THREADS: '1'}` in its models "
                               "entry uses them";
      if (std::find(ctx.notes.begin(), ctx.notes.end(), note) == ctx.notes.end())  // once, not per round
        ctx.notes.push_back(note);
    }
    ctx.package["models"][m.name] = rec;
    round.checks["models"][m.name] = {{"status", record_ok(rec) ? "ok" : "failed"},
                                      {"reason", rec.value("reason", "")}};
  }
  return round;
}

std::string slower_figures(const json& r) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%.4g -> %.4g, %.2f×", r.value("stock_latency", r.value("stock_seconds", 0.0)),
                r.value("forged_latency", r.value("forged_seconds", 0.0)), r.value("speedup", 0.0));
  return buf;
}

}  // namespace

// Packages, then leaves out the kernels of any model that the end-to-end
// check found slower with the library loaded (per-call overhead, or kernels
// faster only in isolation: PERF.md run I) and packages again, until no model
// that still has kernels is slower. Every round is staged and checked beside
// the package in use, which is replaced once, at the end, and only when it
// changed. Each check is a cached step keyed by the package's digest, so an
// unchanged manifest reruns nothing.
void PackageRule::apply(BuildContext& ctx) {
  if (ctx.options.dry_run || ctx.targets.empty()) return;
  const fs::path dir = package_dir(ctx.manifest);
  const fs::path staged = dir.string() + ".new-" + std::to_string(::getpid());
  std::error_code ec;
  std::set<std::string> left_out;
  json dropped = json::object();
  Round round;
  for (;;) {
    round = package_round(ctx, left_out, staged);
    if (round.empty || round.failed || ctx.stopped || ctx.options.dry_run) break;
    std::set<std::string> newly;
    for (const auto& m : round.slower)
      if (!left_out.count(m)) newly.insert(m);
    if (newly.empty()) break;
    for (const auto& m : newly) {
      dropped[m] = ctx.package["models"][m];
      left_out.insert(m);
      ctx.notes.push_back("package: " + m + " ran slower with its forged kernels loaded (" +
                          slower_figures(dropped[m]) + ", every run slower): its kernels are left out of the package");
    }
  }
  for (const auto& m : round.slower)
    if (left_out.count(m) && !round.empty)
      ctx.notes.push_back("package: " + m + " still ran slower with the package (" +
                          slower_figures(ctx.package["models"][m]) +
                          "): other models' kernels override ops it calls");
  if (round.empty) {
    const std::string why = left_out.empty()
                                ? "no accepted kernel yet, so no library (the model runs stock kernels)"
                                : "every model with a forged kernel ran slower with it loaded, so no library";
    ctx.package = {{"status", "empty"}, {"entries", 0}};
    ctx.notes.push_back("package: " + why);
    // No stale library for `forge run` to load: the folder holds only the reason.
    std::string current;
    if (!(read_file(dir / kNoPackageFile, &current) && current == why + "\n") && !ctx.stopped) {
      fs::remove_all(staged, ec);
      fs::create_directories(staged);
      write_file_atomic(staged / kNoPackageFile, why + "\n");
      swap_in(staged, dir);
    }
  } else if (!round.lib.empty() && !ctx.stopped && !ctx.options.dry_run) {
    // The checked package goes in (unless it is the one already there) with
    // its verdicts; `forge run` refuses one whose check failed. An
    // interrupted build leaves the folder as it was.
    if (round.lib.parent_path() == staged) swap_in(staged, dir);
    write_file_atomic(dir / "checks.json", round.checks.dump(2) + "\n");
  }
  fs::remove_all(staged, ec);
  if (!left_out.empty()) ctx.package["left_out"] = dropped;
}

std::optional<std::string> failed_package_check(const Manifest& manifest) {
  const fs::path dir = package_dir(manifest);
  std::string digest, text;
  if (!read_file(dir / "digest", &digest) || !read_file(dir / "checks.json", &text)) return std::nullopt;
  json checks = json::parse(text, nullptr, false);
  // Verdicts about another package (a build stopped before its checks) say nothing.
  if (!checks.is_object() || checks.value("digest", "") != digest) return std::nullopt;
  const json models = checks.value("models", json::object());
  for (const auto& [model, c] : models.items())
    if (!c.is_object() || c.value("status", "") != "ok")
      return "model '" + model + "': " + (c.is_object() ? c.value("reason", "failed") : "failed");
  return std::nullopt;
}

}  // namespace forge
