// The command table. Each command is a small function; shared set-up lives in
// session.cpp, printing in report.cpp.
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "cli/cli.h"
#include "cli/cmd_history.h"
#include "cli/cmd_replay.h"
#include "cli/cmd_run.h"
#include "cli/cmd_serve.h"
#include "cli/cmd_try.h"
#include "cli/report.h"
#include "cli/session.h"
#include "rules/rules.h"
#include "util/error.h"
#include "util/interrupt.h"

namespace forge::cli {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

void expect_no_args(const Invocation& inv, size_t max = 0) {
  if (inv.args.size() > max)
    throw UsageError("unexpected argument '" + inv.args[max] + "' for '" + inv.command + "'");
}

// The session of a build, with the interrupt handler installed first and a
// signal held until the session is open, so the first step sees it: opening
// probes the toolchain (Python importing torch, seconds), and a ^C there
// killed forge without a report.
std::unique_ptr<Session> open_build(const Invocation& inv, const BuildOptions& options) {
  install_interrupt_handler();
  InterruptHold hold;
  return open_session(inv, Access::Write, options);
}

// Ctrl-C or SIGTERM stops the build at the next step and still prints the
// report (util/interrupt.h); the exit status is then 130, as for a shell's ^C.
// The session comes from open_build.
int finish_build(const Invocation& inv, Session& s, bool capture_only) {
  json report = run_build(*s.ctx, default_rules(capture_only));
  if (inv.json)
    std::cout << report.dump(2) << "\n";
  else
    print_build_report(report);
  if (report.value("interrupted", false)) return 130;
  return report.value("ok", false) ? 0 : 1;
}

int cmd_build(const Invocation& inv) {
  BuildOptions options;
  for (size_t i = 0; i < inv.args.size(); ++i) {
    const std::string& a = inv.args[i];
    if (a == "--budget" && i + 1 < inv.args.size()) {
      const std::string& v = inv.args[++i];
      try {
        size_t used = 0;
        int n = std::stoi(v, &used);
        if (used != v.size() || n < 0) throw std::invalid_argument(v);
        options.budget = n;
      } catch (const std::exception&) {
        throw UsageError("--budget needs a non-negative integer, got '" + v + "'");
      }
    } else if (a == "--executor" && i + 1 < inv.args.size()) {
      options.executor = inv.args[++i];
      if (*options.executor != "local" && *options.executor != "slurm")
        throw UsageError("--executor must be local or slurm, got '" + *options.executor + "'");
    } else {
      throw UsageError("unexpected argument '" + a + "' for 'build'");
    }
  }
  auto s = open_build(inv, options);
  return finish_build(inv, *s, false);
}

int cmd_capture(const Invocation& inv) {
  expect_no_args(inv);
  auto s = open_build(inv, {});
  return finish_build(inv, *s, true);
}

// Status = what a build would find now, computed from the store without running.
// --all: every captured op besides, each with why it is not a target.
int cmd_status(const Invocation& inv) {
  bool all = false;
  for (const auto& a : inv.args) {
    if (a != "--all") throw UsageError("unexpected argument '" + a + "' for 'status' (`forge status --help`)");
    all = true;
  }
  BuildOptions options;
  options.dry_run = true;
  auto s = open_session(inv, Access::Read, options);
  json report = run_build(*s->ctx, default_rules(false));
  if (inv.json) {
    json out{{"targets", report["targets"]}, {"models", report["models"]}, {"chains", report["chains"]}};
    if (all) out["not_selected"] = report["not_selected"];
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  for (const auto& [name, m] : report["models"].items())
    if (m.value("status", "") != "ok")
      std::printf("model %s: %s\n", name.c_str(), m.value("reason", "not built").c_str());
  print_targets_table(report["targets"]);
  print_chains(report["chains"]);
  if (all)
    print_not_selected(report["not_selected"]);
  else
    print_not_selected_summary(report["models"]);
  return 0;
}

// Explain TARGET or MODEL: for each step it depends on, whether it is up to date
// and, if not, which inputs changed since it last ran.
int cmd_explain(const Invocation& inv) {
  if (inv.args.size() != 1) throw UsageError("usage: forge explain TARGET|MODEL");
  BuildOptions options;
  options.dry_run = true;
  auto s = open_session(inv, Access::Read, options);
  json report = run_build(*s->ctx, default_rules(false));
  const std::string& name = inv.args[0];
  std::string model;
  std::string target_id;
  for (const auto& m : s->manifest.models)
    if (m.name == name) model = m.name;
  if (model.empty()) {
    const Target& t = resolve_target(s->ctx->targets, name, s->ctx->not_selected);
    model = t.model;
    target_id = t.id;
  }
  json steps = json::array();
  for (const auto& rec : s->ctx->dry_steps) {
    if (!rec.model.empty() && rec.model != model) continue;
    steps.push_back({{"step", rec.spec.kind},
                     {"label", rec.spec.label},
                     {"up_to_date", rec.explanation.up_to_date},
                     {"reasons", rec.explanation.reasons}});
  }
  if (inv.json) {
    std::cout << json{{"name", target_id.empty() ? model : target_id}, {"steps", steps}}.dump(2)
              << "\n";
    return 0;
  }
  std::printf("%s:\n", (target_id.empty() ? model : target_id).c_str());
  for (const auto& st : steps) {
    std::printf("  %s %s: %s\n", st["step"].get<std::string>().c_str(),
                st["label"].get<std::string>().c_str(),
                st["up_to_date"].get<bool>() ? "up to date" : "will run");
    if (!st["up_to_date"].get<bool>())
      for (const auto& r : st["reasons"]) std::printf("    - %s\n", r.get<std::string>().c_str());
  }
  return 0;
}

int cmd_clean(const Invocation& inv) {
  expect_no_args(inv);
  Manifest m = load_manifest(inv.dir / "forge.yaml");
  std::error_code ec;
  if (!fs::exists(m.store, ec)) {
    if (!inv.json) std::printf("nothing to clean (%s does not exist)\n", m.store.c_str());
    if (inv.json) std::cout << json{{"removed", false}, {"store", m.store.string()}} << "\n";
    return 0;
  }
  {
    // Wait for a running build rather than pulling the store from under it.
    store::StoreLock lock(m.store, [](const std::string& msg) {
      std::fprintf(stderr, "forge: %s\n", msg.c_str());
    });
    for (const auto& entry : fs::directory_iterator(m.store))
      if (entry.path().filename() != "lock") fs::remove_all(entry.path(), ec);
  }
  fs::remove_all(m.store, ec);
  if (inv.json)
    std::cout << json{{"removed", true}, {"store", m.store.string()}} << "\n";
  else
    std::printf("removed %s\n", m.store.c_str());
  return 0;
}

int cmd_version(const Invocation& inv) {
  expect_no_args(inv);
  if (inv.json)
    std::cout << json{{"version", FORGE_VERSION}} << "\n";
  else
    std::printf("forge %s\n", FORGE_VERSION);
  return 0;
}

}  // namespace

const std::vector<CommandDef>& commands() {
  static const std::vector<CommandDef> table = {
      {"build", "build [--budget N] [--executor local|slurm]", "capture, search, package: everything out of date",
       cmd_build,
       "  --budget N               MCTS iterations per target (overrides forge.yaml's budget.iterations)\n"
       "  --executor local|slurm   where candidates are evaluated (overrides forge.yaml's executor:)\n"
       "The report lists each selected target, and why one is not searched; `forge status --all`\n"
       "lists every captured op. Ctrl-C stops at the next step; the next build continues.\n"},
      {"capture", "capture", "run each model's command and record its ATen ops", cmd_capture,
       "No options. Runs the capture stage only; the report's targets are those the search would\n"
       "take, before it checks for an op family and an applicable strategy.\n"},
      {"status", "status [--all]", "targets ranked by time share, with what is built", cmd_status,
       "  --all    also every captured op that is not a target, with the reason: a view, an\n"
       "           allocation, a random-number op, a cross-device copy, what the candidate ABI\n"
       "           cannot carry, below targets.min_share, beyond targets.top, ...\n"
       "Each target not searched says why (no op family, no strategy applies at this shape).\n"
       "Runs nothing: reads what the last build stored. --json: {targets, models[, not_selected]}.\n"},
      {"explain", "explain TARGET|MODEL", "why a target or model will or will not rebuild",
       cmd_explain, "  TARGET   a target id or any unique prefix of one (`forge status` lists them)\n"
                    "  MODEL    a model name from forge.yaml\n"},
      {"try", "try TARGET FILE [--timeout S]",
       "evaluate your own kernel (.cpp/.cu) against a target", cmd_try,
       "  TARGET       a target id or any unique prefix of one\n"
       "  FILE         a .cpp (CPU backend) or .cu (CUDA backend) defining forge_kernel\n"
       "               (runtime/abi/forge_kernel.h, docs/CANDIDATE_ABI.md)\n"
       "  --timeout S  seconds the evaluation may take (default: 60 plus 1 per 10 MB\n"
       "               the call moves, at most 3600)\n"},
      {"log", "log [TARGET]", "the accepted kernels committed to git history, newest first",
       cmd_log, "  TARGET   only this target's commits (an id or any prefix of one)\n"},
      {"diff", "diff A B", "diff the kernels of two history revisions (forge/kernels~1 ...)",
       cmd_diff, "  A B      git revisions of the history ref (forge/kernels, forge/kernels~1, a sha)\n"},
      {"replay", "replay [REV [TARGET]] [--timeout S]",
       "rebuild, re-verify and re-time history's kernels now, beside what was recorded",
       cmd_replay,
       "  REV          a history revision (default: the tip of forge/kernels)\n"
       "  TARGET       only this target (an id or any prefix of one)\n"
       "  --timeout S  seconds each evaluation may take (default: 60 plus 1 per 10 MB\n"
       "               the call moves, at most 3600)\n"},
      {"bisect", "bisect TARGET --slower-than US | --fails-on INPUT",
       "the first history commit whose kernel is slower than US µs or fails on INPUT",
       cmd_bisect,
       "  --slower-than US  the first commit whose kernel's median is above US microseconds\n"
       "  --fails-on INPUT  the first commit whose kernel is rejected on INPUT: a verification\n"
       "                    case ('sample 0') or a file of inputs (docs/HISTORY.md)\n"
       "  --timeout S       seconds each evaluation may take (default: 60 plus 1 per\n"
       "                    10 MB the call moves, at most 3600)\n"},
      {"run", "run [--json-report FILE] [--unchecked] -- COMMAND...",
       "run a program with the forged kernels loaded; prints forged/fallback calls", cmd_run,
       "  --json-report FILE  write the forged/fallback counts per op and signature to FILE\n"
       "  --unchecked         load a package whose end-to-end check failed\n"
       "  -- COMMAND...       the program and its arguments (its own --help is passed on)\n"},
      {"serve", "serve [--port N] [--bind ADDR]",
       "a live browser view of builds, search trees, kernels and failures", cmd_serve,
       "  --port N      the port (default 7878; 0 = any free one)\n"
       "  --bind ADDR   the address to listen on (default 127.0.0.1)\n"},
      {"clean", "clean", "remove the store (.forge/); git history stays", cmd_clean, "No options.\n"},
      {"version", "version", "print forge's version", cmd_version, "No options.\n"},
  };
  return table;
}

}  // namespace forge::cli
