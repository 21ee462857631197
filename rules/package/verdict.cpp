// Package, the end-to-end verdict (verdict.h).
#include "rules/package/verdict.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <regex>

#include "rules/capture/model_command.h"
#include "rules/package/package.h"
#include "util/atomic_file.h"

namespace forge {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The two sides an end-to-end check times against each other: command(false)
// the baseline ("stock" in the record), command(true) the side judged
// ("forged"); `what` names the judged side in messages.
struct Sides {
  std::function<Command(bool judged)> command;
  std::string what;
};

// The end-to-end check of one model (a cached step: package digest x model).
json end_to_end(BuildContext& ctx, const ModelSpec& m, const Sides& sides, int runs, bool check = true) {
  const fs::path reports = ctx.manifest.store / "tmp" / ("e2e-" + m.name + "-" + std::to_string(::getpid()));
  std::error_code ec;
  fs::remove_all(reports, ec);
  fs::create_directories(reports);
  const double timeout = ctx.manifest.capture.timeout_seconds;
  auto run = [&](bool forged, bool check) {
    Command c = sides.command(forged);
    if (check) {
      c.env["FORGE_PACKAGE_CHECK"] = "1";
      c.env["FORGE_PACKAGE_REPORT"] = reports.string();
    }
    c.timeout_seconds = timeout;
    return ctx.runner.run(c);
  };
  // 1. Correctness: every forged call also run by stock and compared.
  if (check) {
    CommandResult r = run(true, true);
    if (!r.ok()) {
      fs::remove_all(reports, ec);
      return failed_record("`" + m.run + "` " + sides.what + " " + r.describe(),
                           r.err.size() > 2000 ? r.err.substr(r.err.size() - 2000) : r.err);
    }
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
  // Whether the checked run called torch.compile (compile.py's marker): only
  // then can compiled-graph routing change what the command runs.
  if (check) out["torch_compile"] = merged.value("torch_compile", false);
  if (mismatches) out["reason"] = "forged outputs differ from stock in the model run";
  return out;
}

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

// A compiled run slower with every route that reaches the model, timed again
// with one route on at a time against none (FORGE_COMPILE_ROUTES_OFF holds the
// others): a kernel that splits Inductor's fusion with its neighbours is
// found without taking the routes that pay with it. One row per route, timed
// only: the check run before them compared every routed call with stock.
json per_route_trials(BuildContext& ctx, const ModelSpec& m, const Sides& compiled,
                      const std::set<std::string>& routed, int runs) {
  json rows = json::array();
  for (const auto& id : routed) {
    std::string others;
    for (const auto& o : routed)
      if (o != id) others += (others.empty() ? "" : ",") + o;
    const Sides alone{[compiled, others](bool routes) {
                        Command c = compiled.command(routes);
                        if (routes) c.env["FORGE_COMPILE_ROUTES_OFF"] = others;
                        return c;
                      },
                      "under torch.compile with only " + id + " routed"};
    json a = end_to_end(ctx, m, alone, runs, /*check=*/false);
    json row = {{"target", id}, {"status", a.value("status", "failed")}};
    for (const char* k : {"reason", "speedup", "compared_stock", "compared_forged"})
      if (a.contains(k)) row[k] = a[k];
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace

std::set<std::string> routes_to_turn_off(const json& compiled, const std::set<std::string>& routed) {
  std::set<std::string> off;
  for (const auto& row : compiled.value("per_route", json::array()))
    if (!record_ok(row) || record_slower(row)) off.insert(row.value("target", ""));
  // Failed, not split per route, or no route slower alone (they cost the model
  // together): every route that reaches it goes.
  return compiled.value("failed", false) || off.empty() ? routed : off;
}

json merge_package_reports(const fs::path& dir) {
  std::map<std::string, json> entries;
  std::map<std::pair<std::string, std::string>, long> fallback;
  bool torch_compile = false;
  std::error_code ec;
  for (const auto& f : fs::directory_iterator(dir, ec)) {
    std::string text;
    if (!read_file(f.path(), &text)) continue;
    json r = json::parse(text, nullptr, false);
    if (!r.is_object()) continue;
    torch_compile = torch_compile || r.value("torch_compile", false);
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
  json out = {{"entries", json::array()}, {"fallback", json::array()}, {"torch_compile", torch_compile}};
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

std::vector<const Target*> reaching_targets(const BuildContext& ctx, const Assembly& assembly,
                                            const std::string& model) {
  // A single op's guard may take other extents than the captured one
  // (vary_max), so any call of its op counts; a chain matches its signature.
  auto key = [](const Target& t) { return t.chain.is_null() ? t.op : t.signature; };
  std::set<std::string> captured;
  for (const auto* list : {&ctx.targets, &ctx.not_selected, &ctx.chain_targets})
    for (const Target& t : *list)
      if (t.model == model) captured.insert(key(t));
  std::vector<const Target*> out;
  for (const auto& [owner, targets] : assembly.forged_by_model)
    for (const Target* t : targets)
      if (owner == model || captured.count(key(*t))) out.push_back(t);
  return out;
}

Verdicts check_package(BuildContext& ctx, const Assembly& assembly, const std::set<std::string>& left_out) {
  Verdicts out;
  const auto& forged_by_model = assembly.forged_by_model;
  const auto& rt = assembly.rt;
  // End to end, per model. The verdicts also go to checks.json beside the
  // library, for `forge run` (failed_package_check).
  out.checks = {{"digest", assembly.digest}, {"models", json::object()}};
  for (const auto& m : ctx.manifest.models) {
    auto it = forged_by_model.find(m.name);
    const std::vector<const Target*> reaching = reaching_targets(ctx, assembly, m.name);
    if (reaching.empty() && !left_out.count(m.name)) continue;
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
    spec.inputs = {{"package", assembly.digest},
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
    const fs::path lib = assembly.lib;
    const Sides eager{[&m, &rt, lib](bool forged) {
                        return model_command(m, *rt, forged ? std::vector<std::string>{lib.string()}
                                                            : std::vector<std::string>{});
                      },
                      "with libforge.so loaded"};
    spec.run = [&ctx, &m, eager, runs, digest = assembly.digest] {
      json r = end_to_end(ctx, m, eager, runs);
      r["checked_package"] = digest;  // an earlier round's, when reused below
      return r;
    };
    // A command that never called torch.compile ran the same with any
    // compiled-graph routing, so its check is also kept under the package's
    // digest without routing (Assembly::eager_digest), and a package that
    // differs from a checked one only there (a round after the compiled A/B
    // turned routes off) reuses it.
    StepSpec unrouted = spec;
    unrouted.name = "e2e-unrouted/" + m.name;
    for (auto& [k, v] : unrouted.inputs)
      if (k == "package") v = assembly.eager_digest;
    unrouted.inputs.emplace_back("torch.compile", "not called by the checked run");
    std::optional<StepOutcome> outcome;
    if (ctx.builder.lookup(unrouted)) {
      outcome = ctx.step(unrouted, m.name);
    } else {
      outcome = ctx.step(spec, m.name);
      if (outcome && !ctx.options.dry_run && outcome->record.value("torch_compile", true) == false)
        ctx.builder.keep(unrouted, outcome->record);
    }
    if (!outcome) continue;
    json rec = outcome->record;
    rec["amdahl_bound"] = saved < 1 ? 1 / (1 - saved) : 0.0;
    rec["slower"] = record_slower(rec);
    if (!record_ok(rec)) {
      ctx.failed = out.failed = true;
      ctx.notes.push_back("package: end-to-end check of " + m.name + " failed: " + rec.value("reason", ""));
    }
    if (rec["slower"].get<bool>()) (it != forged_by_model.end() ? out.slower : out.slower_by_others).insert(m.name);
    // Under torch.compile (models.NAME.compile_env): the library loaded on
    // both sides, forge's routes into compiled graphs off (FORGE_COMPILE_POLICY
    // =inductor) against on (the package's choices). A kernel faster than
    // Inductor's code for its op alone can lose to Inductor's fusion of it
    // with its neighbours (docs/PACKAGE.md), which only this run sees.
    std::set<std::string> routed;  // reaching targets routed into compiled graphs
    for (const Target* t : reaching)
      if (t->under_compile == "forge") routed.insert(t->id);
    if (m.compile_env && !routed.empty() && record_ok(rec)) {
      StepSpec cspec = spec;
      cspec.name = "e2e-compile/" + m.name;
      cspec.label = m.name + " under torch.compile";
      cspec.inputs.emplace_back("compile_env", json(*m.compile_env).dump());
      cspec.inputs.emplace_back("sides", "FORGE_COMPILE_POLICY=inductor, then the package's");
      const Sides compiled{[&m, &rt, lib](bool routes) {
                             Command c = model_command(m, *rt, {lib.string()});
                             for (const auto& [k, v] : *m.compile_env) c.env[k] = v;
                             if (!routes) c.env["FORGE_COMPILE_POLICY"] = "inductor";
                             return c;
                           },
                           "under torch.compile with forge's routes"};
      // A compiled run that did not finish is a finding of this check (the
      // routes go), not a failed build: the step's record stays "ok" and says
      // "failed": true. Forged outputs that differ from stock fail the build,
      // as in the eager check.
      cspec.inputs.emplace_back("routes", json(routed).dump());
      cspec.run = [&ctx, &m, compiled, runs, routed] {
        json r = end_to_end(ctx, m, compiled, runs);
        if (!record_ok(r) && r.value("mismatches", 0L) == 0) r["status"] = "ok", r["failed"] = true;
        if (record_ok(r) && !r.value("failed", false) && routed.size() > 1 && record_slower(r)) {
          r["per_route"] = per_route_trials(ctx, m, compiled, routed, runs);
        }
        return r;
      };
      if (auto c = ctx.step(cspec, m.name)) {
        json crec = c->record;
        crec["slower"] = record_slower(crec);
        crec["sides"] = "compiled graphs on Inductor's code (stock_*) and with forge's routes (forged_*), "
                        "the library loaded in both";
        // Mismatches fail the build; a run that did not finish, or a slower
        // one, takes the model's routes away (PackageRule), its eager verdict
        // standing.
        if (!record_ok(crec)) {
          ctx.failed = out.failed = true;
          ctx.notes.push_back("package: end-to-end check of " + m.name + " under torch.compile failed: " +
                              crec.value("reason", ""));
          rec["status"] = "failed";  // `forge run` refuses the package (checks.json)
          rec["reason"] = "under torch.compile: " + crec.value("reason", "");
        } else if (crec.value("failed", false) || crec["slower"].get<bool>()) {
          out.compile_slower[m.name] = routes_to_turn_off(crec, routed);
        }
        rec["compiled"] = crec;
      }
    }
    if (held_back(rec)) {
      const std::string note = "package: " + m.name +
                               " ran torch with more intra-op threads than its CPU kernels were measured against, "
                               "so none of their calls was forged; `env: {OMP_NUM_THREADS: '1'}` in its models "
                               "entry uses them";
      if (std::find(ctx.notes.begin(), ctx.notes.end(), note) == ctx.notes.end())  // once, not per round
        ctx.notes.push_back(note);
    }
    ctx.package["models"][m.name] = rec;
    out.checks["models"][m.name] = {{"status", record_ok(rec) ? "ok" : "failed"},
                                      {"reason", rec.value("reason", "")}};
  }
  return out;
}


std::string slower_figures(const json& r) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%.4g -> %.4g, %.2f×", r.value("stock_latency", r.value("stock_seconds", 0.0)),
                r.value("forged_latency", r.value("forged_seconds", 0.0)), r.value("speedup", 0.0));
  return buf;
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
