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
int cmd_status(const Invocation& inv) {
  expect_no_args(inv);
  BuildOptions options;
  options.dry_run = true;
  auto s = open_session(inv, Access::Read, options);
  json report = run_build(*s->ctx, default_rules(false));
  if (inv.json) {
    std::cout << json{{"targets", report["targets"]}, {"models", report["models"]}}.dump(2)
              << "\n";
    return 0;
  }
  for (const auto& [name, m] : report["models"].items())
    if (m.value("status", "") != "ok")
      std::printf("model %s: %s\n", name.c_str(), m.value("reason", "not built").c_str());
  print_targets_table(report["targets"]);
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
    const Target& t = resolve_target(s->ctx->targets, name);
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
       cmd_build},
      {"capture", "capture", "run each model's command and record its ATen ops", cmd_capture},
      {"status", "status", "targets ranked by time share, with what is built", cmd_status},
      {"explain", "explain TARGET|MODEL", "why a target or model will or will not rebuild",
       cmd_explain},
      {"try", "try TARGET FILE [--timeout S]",
       "evaluate your own kernel (.cpp/.cu) against a target", cmd_try},
      {"log", "log [TARGET]", "the accepted kernels committed to git history, newest first",
       cmd_log},
      {"diff", "diff A B", "diff the kernels of two history revisions (forge/kernels~1 ...)",
       cmd_diff},
      {"replay", "replay [REV [TARGET]] [--timeout S]",
       "rebuild, re-verify and re-time history's kernels now, beside what was recorded",
       cmd_replay},
      {"bisect", "bisect TARGET --slower-than US | --fails-on INPUT",
       "the first history commit whose kernel is slower than US µs or fails on INPUT",
       cmd_bisect},
      {"run", "run [--json-report FILE] [--unchecked] -- COMMAND...",
       "run a program with the forged kernels loaded; prints forged/fallback calls", cmd_run},
      {"serve", "serve [--port N] [--bind ADDR]",
       "a live browser view of builds, search trees, kernels and failures", cmd_serve},
      {"clean", "clean", "remove the store (.forge/); git history stays", cmd_clean},
      {"version", "version", "print forge's version", cmd_version},
  };
  return table;
}

}  // namespace forge::cli
