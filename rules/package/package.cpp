// Package (package.h): the rule that assembles the package (assembly.h) and
// judges it end to end (verdict.h), round after round.
#include "rules/package/package.h"

#include <unistd.h>

#include <map>
#include <set>
#include <vector>

#include "rules/package/assembly.h"
#include "rules/package/verdict.h"
#include "util/atomic_file.h"

namespace forge {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

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
  std::set<std::string> slower;             // checked models with kernels of their own found slower
  std::set<std::string> slower_by_others;   // checked models without (verdict.h)
  std::map<std::string, std::set<std::string>> compile_slower;  // model -> the routes that go (verdict.h)
  bool failed = false;           // a check of this round failed
};

Round package_round(BuildContext& ctx, const std::set<std::string>& left_out, const fs::path& staged) {
  Round round;
  Assembly assembly = assemble_package(ctx, left_out, staged);
  round.empty = assembly.empty;
  round.failed = assembly.failed;
  if (assembly.empty || assembly.failed) return round;
  round.digest = assembly.digest;
  round.lib = assembly.lib;
  Verdicts verdicts = check_package(ctx, assembly, left_out);
  round.checks = std::move(verdicts.checks);
  round.slower = std::move(verdicts.slower);
  round.slower_by_others = std::move(verdicts.slower_by_others);
  round.compile_slower = std::move(verdicts.compile_slower);
  round.failed = verdicts.failed;
  return round;
}

// Compiled graphs keep Inductor's code for the targets `ids` (single ops and
// chains) still routed; returns those that were.
std::vector<std::string> route_off(BuildContext& ctx, const std::set<std::string>& ids, const std::string& why) {
  std::vector<std::string> off;
  for (auto* list : {&ctx.targets, &ctx.chain_targets})
    for (Target& t : *list)
      if (ids.count(t.id) && t.under_compile == "forge") {
        t.under_compile = "inductor";
        t.under_compile_why = why;
        off.push_back(t.id);
      }
  return off;
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
  if (ctx.options.dry_run || (ctx.targets.empty() && ctx.chain_targets.empty())) return;
  const fs::path dir = package_dir(ctx.manifest);
  const fs::path staged = dir.string() + ".new-" + std::to_string(::getpid());
  std::error_code ec;
  std::set<std::string> left_out;
  json dropped = json::object();
  json slower_routed = json::object();  // per model, the compiled checks that turned routes off, in order
  Round round;
  for (;;) {
    round = package_round(ctx, left_out, staged);
    if (round.empty || round.failed || ctx.stopped || ctx.options.dry_run) break;
    std::set<std::string> newly;
    for (const auto& m : round.slower)
      if (!left_out.count(m)) newly.insert(m);
    // A compiled run slower with the routes: the routes that reach the model
    // go (its own and other models' of the same signatures); the kernels stay
    // for eager calls (the eager verdict judges those). Each such round turns
    // at least one route off, so the loop ends.
    bool turned_off = false;
    for (const auto& [m, ids] : round.compile_slower) {
      if (newly.count(m)) continue;
      const json& c = ctx.package["models"][m]["compiled"];
      const bool failed = c.value("failed", false);
      const std::string figures = failed ? "" : slower_figures(c);
      const auto off = route_off(ctx, ids,
                                 failed ? "models." + m + "'s compiled run failed with forge's routes"
                                        : "models." + m + "'s compiled run was slower with forge's routes (" +
                                              figures + ")");
      if (off.empty()) continue;
      turned_off = true;
      json record = c;
      record["turned_off"] = off;
      slower_routed[m].push_back(std::move(record));
      std::string names;
      for (const auto& id : off) names += (names.empty() ? "" : ", ") + id;
      ctx.notes.push_back("package: " + m +
                          (failed ? "'s compiled run (compile_env) failed with forge's routes into compiled graphs (" +
                                        c.value("reason", "") + ")"
                                  : " ran slower under torch.compile with forge's routes into compiled graphs (" +
                                        figures + ", every run slower)") +
                          (c.contains("per_route") ? "; timed one route at a time" : "") +
                          ": compiled graphs keep Inductor's code for " + names);
    }
    if (newly.empty() && !turned_off) break;
    for (const auto& m : newly) {
      dropped[m] = ctx.package["models"][m];
      left_out.insert(m);
      ctx.notes.push_back("package: " + m + " ran slower with its forged kernels loaded (" +
                          slower_figures(dropped[m]) + ", every run slower): its kernels are left out of the package");
    }
  }
  for (const auto& m : round.slower_by_others)
    if (!round.empty)
      ctx.notes.push_back("package: " + m + (left_out.count(m) ? " still ran" : " ran") + " slower with the package (" +
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
  if (!slower_routed.empty()) ctx.package["routes_off"] = slower_routed;
}

}  // namespace forge
