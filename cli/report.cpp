#include "cli/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

namespace forge::cli {

using nlohmann::json;

namespace {

std::string fmt(const json& v, const char* pattern, double scale = 1) {
  if (!v.is_number()) return "-";
  double x = v.get<double>() * scale;
  if (std::isinf(x)) return "inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, pattern, x);
  return buf;
}

std::string human_bytes(const json& v) {
  if (!v.is_number()) return "-";
  double b = v.get<double>();
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (b >= 1000 && u < 4) {
    b /= 1000;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", b, units[u]);
  return buf;
}

}  // namespace

void print_targets_table(const json& targets) {
  if (targets.empty()) {
    std::printf("no targets (nothing captured yet, or none selected by forge.yaml's targets:)\n");
    return;
  }
  std::printf("%-36s %6s %7s %10s %9s %9s %6s %5s %5s %8s %8s %6s  %s\n", "target", "share",
              "calls", "time_us", "bytes", "floor_us", "e2e≤", "iters", "best@", "×eager", "×compile",
              "floor%", "signature");
  for (const auto& t : targets) {
    std::printf("%-36s %6s %7ld %10s %9s %9s %6s %5d %5s %8s %8s %6s  %s\n",
                t.value("id", "").c_str(), fmt(t["share"], "%.1f%%", 100).c_str(),
                t.value("calls", 0L), fmt(t["time_us"], "%.0f").c_str(),
                human_bytes(t["bytes"]).c_str(), fmt(t["floor_us"], "%.1f").c_str(),
                fmt(t["amdahl_max_speedup"], "%.2f×").c_str(), t.value("iterations", 0),
                fmt(t["best_iteration"], "%.0f").c_str(),
                fmt(t["best_speedup_eager"], "%.2f").c_str(),
                fmt(t["best_speedup_compile"], "%.2f").c_str(),
                fmt(t["floor_pct"], "%.0f%%").c_str(), t.value("signature", "").c_str());
  }
  // Selected but not searched (no op family, no strategy at this shape): why.
  for (const auto& t : targets)
    if (t.value("selection", "selected") != "selected")
      std::printf("%-36s not searched (%s): %s\n", t.value("id", "").c_str(), t.value("selection", "").c_str(),
                  t.value("why", json()).is_string() ? t["why"].get<std::string>().c_str() : "");
  // Failures by kind (and how many verified but were slower) per searched target.
  for (const auto& t : targets) {
    if (t.value("iterations", 0) == 0 || !t.contains("outcomes")) continue;
    std::string line;
    for (const auto& [kind, n] : t["outcomes"].items())
      line += (line.empty() ? "" : ", ") + kind + " " + std::to_string(n.get<int>());
    std::printf("%-36s outcomes: %s\n", t.value("id", "").c_str(), line.c_str());
    const json rejections = t.value("rejections", json::object());  // items() must not outlive it
    for (const auto& [why, n] : rejections.items())
      std::printf("%-36s   %d× %s\n", "", n.get<int>(), why.c_str());
  }
}

static std::string not_selected_counts(const json& model) {
  std::string out;
  const json counts = model.value("not_selected", json::object());  // items() must not outlive it
  for (const auto& [reason, n] : counts.items())
    out += (out.empty() ? "" : ", ") + std::to_string(n.get<int>()) + " " + reason;
  return out;
}

void print_not_selected_summary(const json& models) {
  for (const auto& [name, m] : models.items())
    if (std::string counts = not_selected_counts(m); !counts.empty())
      std::printf("model %s: not selected: %s (`forge status --all` lists them with why)\n", name.c_str(),
                  counts.c_str());
}

void print_not_selected(const json& ops) {
  if (!ops.is_array() || ops.empty()) return;
  std::printf("\nnot selected: %zu captured op signature(s), each with why\n", ops.size());
  int width = 36;  // the id column: as wide as the longest id
  for (const auto& t : ops) width = std::max(width, static_cast<int>(t.value("id", "").size()));
  std::printf("%-*s %6s %7s %10s  %-15s  %s\n", width, "op", "share", "calls", "time_us", "reason", "signature");
  for (const auto& t : ops) {
    std::printf("%-*s %6s %7ld %10s  %-15s  %s\n", width, t.value("id", "").c_str(),
                fmt(t.value("share", json()), "%.1f%%", 100).c_str(), t.value("calls", 0L),
                fmt(t.value("time_us", json()), "%.0f").c_str(), t.value("selection", "").c_str(),
                t.value("signature", "").c_str());
    if (const json why = t.value("why", json()); why.is_string())
      std::printf("%-*s   %s\n", width, "", why.get<std::string>().c_str());
  }
}

void print_chains(const json& chains) {
  if (!chains.is_array() || chains.empty()) return;
  std::printf("\nchains: %zu run(s) of ops whose intermediates nothing else reads (fusion candidates)\n",
              chains.size());
  std::printf("%-12s %6s %7s %10s  %s\n", "model", "share", "calls", "time_us", "ops");
  for (const auto& c : chains) {
    std::string ops;
    for (const auto& o : c.value("ops", json::array())) ops += (ops.empty() ? "" : " -> ") + o.get<std::string>();
    std::printf("%-12s %6s %7ld %10s  %s\n", c.value("model", "").c_str(),
                fmt(c.value("share", json()), "%.1f%%", 100).c_str(), c.value("calls", 0L),
                fmt(c.value("time_us", json()), "%.0f").c_str(), ops.c_str());
    if (const json mod = c.value("module", json()); mod.is_string())
      std::printf("%-12s %6s %7s %10s  in %s%s\n", "", "", "", "", mod.get<std::string>().c_str(),
                  c.value("whole_forward", false) ? " (its whole forward)" : "");
    if (const json id = c.value("id", json()); id.is_string())
      std::printf("%-12s %6s %7s %10s  target %s\n", "", "", "", "", id.get<std::string>().c_str());
    if (const json why = c.value("why", json()); why.is_string())
      std::printf("%-12s %6s %7s %10s  %s\n", "", "", "", "", why.get<std::string>().c_str());
  }
}

static void print_package(const json& p) {
  if (!p.is_object()) return;
  const json left_out = p.value("left_out", json::object());
  for (const auto& [name, m] : left_out.items())
    std::printf("package: %s ran slower with its forged kernels loaded (%s×, every run slower): "
                "they are left out\n",
                name.c_str(), fmt(m["speedup"], "%.2f").c_str());
  if (p.value("status", "") != "ok") return;
  std::printf("package: %s (%d forged target(s)); run your program with `forge run -- CMD`\n",
              p.value("library", "").c_str(), p.value("entries", 0));
  const json models = p.value("models", json::object());  // items() must not outlive it
  for (const auto& [name, m] : models.items()) {
    if (m.value("status", "") != "ok" && !m.contains("forged_calls")) {
      std::printf("  %s: end-to-end check failed: %s (`forge run` refuses this package; "
                  "--unchecked loads it anyway)\n",
                  name.c_str(), m.value("reason", "").c_str());
      continue;
    }
    // With models.NAME.latency the verdict compares the model's own figure.
    char timing[160];
    if (m.contains("stock_latency"))
      std::snprintf(timing, sizeof timing, "its own figure %.4g -> %.4g (models.%s.latency)",
                    m.value("stock_latency", 0.0), m.value("forged_latency", 0.0), name.c_str());
    else
      std::snprintf(timing, sizeof timing, "whole command %.3f s -> %.3f s",
                    m.value("stock_seconds", 0.0), m.value("forged_seconds", 0.0));
    // The bound divides by all captured device time, set-up and warm-up
    // included; a steady-state figure can beat it (docs/PERF.md, "End to end").
    const double bound = m["amdahl_bound"].is_number() ? m["amdahl_bound"].get<double>() : 0.0;
    const bool past_bound = bound > 0 && m.value("speedup", 0.0) > bound &&
                            m.value("significant", false) && m.contains("stock_latency");
    std::printf("  %s: %ld forged calls, %ld fell back, %ld mismatches against stock; "
                "%s (%s×, %s; Amdahl bound %s×%s)\n",
                name.c_str(), m.value("forged_calls", 0L), m.value("fallback_calls", 0L),
                m.value("mismatches", 0L), timing, fmt(m["speedup"], "%.2f").c_str(),
                m.value("significant", false) ? "every forged run faster" : "within run-to-run noise",
                fmt(m["amdahl_bound"], "%.2f").c_str(),
                past_bound ? " over the whole captured run, set-up included" : "");
    if (long n = m.value("more_threads_calls", 0L))
      std::printf("    %ld of the fallbacks were in a CPU kernel's family: torch had more intra-op threads than "
                  "stock had when the kernel beat it (`env: {OMP_NUM_THREADS: '1'}` in models.%s uses them)\n",
                  n, name.c_str());
    if (const json c = m.value("compiled", json()); c.is_object() && !c.value("failed", false))
      std::printf("    under torch.compile (models.%s.compile_env): %ld forged calls; Inductor's code -> forge's "
                  "routes %s×, %s\n",
                  name.c_str(), c.value("forged_calls", 0L), fmt(c["speedup"], "%.2f").c_str(),
                  c.value("significant", false) ? "every routed run faster" : "within run-to-run noise");
  }
  const json routes_off = p.value("routes_off", json::object());
  for (const auto& [name, checks] : routes_off.items())
  for (const auto& c : checks) {
    std::string off;
    for (const auto& id : c.value("turned_off", json::array())) off += (off.empty() ? "" : ", ") + id.get<std::string>();
    if (c.value("failed", false))
      std::printf("  %s: its compiled run failed with forge's routes (%s): compiled graphs keep Inductor's code "
                  "for %s\n",
                  name.c_str(), c.value("reason", "").c_str(), off.c_str());
    else
      std::printf("  %s: under torch.compile forge's routes made it slower (%s×, every run slower): compiled "
                  "graphs keep Inductor's code for %s\n",
                  name.c_str(), fmt(c["speedup"], "%.2f").c_str(), off.c_str());
    for (const auto& row : c.value("per_route", json::array()))
      std::printf("    with only %s routed: %s\n", row.value("target", "").c_str(),
                  row.value("status", "") != "ok" ? ("failed: " + row.value("reason", "")).c_str()
                                                   : (fmt(row["speedup"], "%.2f") + "× Inductor's code").c_str());
  }
}

void print_build_report(const json& report) {
  const json& dev = report["device"];
  std::printf("forge build: %s, %d steps run, %d cached; %s backend (%s), torch %s\n",
              report.value("ok", false) ? "ok" : "FAILED", report.value("steps_run", 0),
              report.value("steps_cached", 0), dev.value("backend", "").c_str(),
              dev.value("name", "").c_str(), report.value("torch", "").c_str());
  for (const auto& [name, m] : report["models"].items()) {
    if (m.value("status", "") != "ok") {
      std::printf("model %s: %s: %s\n", name.c_str(), m.value("status", "").c_str(),
                  m.value("reason", "").c_str());
      continue;
    }
    std::printf("model %s: %ld backend-op calls in %d process(es), %s µs op time (%s), %d of %d "
                "captured signatures selected\n",
                name.c_str(), m.value("calls", 0L), m.value("processes", 0),
                fmt(m["time_us"], "%.0f").c_str(), m.value("timing", "").c_str(),
                m.value("selected", 0), m.value("signatures", 0));
  }
  print_not_selected_summary(report["models"]);
  print_targets_table(report["targets"]);
  print_chains(report.value("chains", json()));
  print_package(report.value("package", json()));
  const json& h = report.value("history", json());
  if (h.is_object() && h["repo"].is_string())
    std::printf("history: %d commit(s) added to %s in %s (tip %s)\n", h.value("commits_added", 0),
                h.value("ref", "").c_str(), h.value("repo", "").c_str(),
                h["tip"].is_string() ? h["tip"].get<std::string>().substr(0, 12).c_str() : "none");
  for (const auto& note : report.value("notes", json::array()))
    std::printf("note: %s\n", note.get<std::string>().c_str());
}

}  // namespace forge::cli
