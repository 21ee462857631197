// `forge replay` and `forge bisect`: history's kernels evaluated again, now.
#include "cli/cmd_replay.h"

#include <cstdio>
#include <iostream>

#include "cli/evaluation.h"
#include "rules/history/replay.h"
#include "runtime/common/dtypes.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace forge::cli {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const char* kReplayUsage = "usage: forge replay [REV [TARGET]] [--timeout SECONDS]";
const char* kBisectUsage =
    "usage: forge bisect TARGET (--slower-than MICROSECONDS | --fails-on INPUT) "
    "[--timeout SECONDS]";

double parse_positive(const std::string& option, const std::string& v) {
  try {
    size_t used = 0;
    double x = std::stod(v, &used);
    if (used == v.size() && x > 0) return x;
  } catch (const std::exception&) {
  }
  throw UsageError(option + " needs a positive number, got '" + v + "'");
}

// Positionals, --timeout, and (bisect) --slower-than / --fails-on.
struct Args {
  std::vector<std::string> positional;
  std::optional<double> timeout;  // unset: grows with the target's bytes (rules/evaluate/timeout.h)
  std::optional<double> slower_than;
  std::optional<std::string> fails_on;
};

Args parse(const Invocation& inv, bool bisect) {
  Args a;
  for (size_t i = 0; i < inv.args.size(); ++i) {
    const std::string& s = inv.args[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= inv.args.size()) throw UsageError(s + " needs a value");
      return inv.args[++i];
    };
    if (s == "--timeout") {
      a.timeout = parse_positive(s, value());
    } else if (bisect && s == "--slower-than") {
      a.slower_than = parse_positive(s, value());
    } else if (bisect && s == "--fails-on") {
      a.fails_on = value();
    } else if (!s.empty() && s[0] == '-') {
      throw UsageError("unknown option '" + s + "' for '" + inv.command + "'");
    } else {
      a.positional.push_back(s);
    }
  }
  return a;
}

fs::path history_repo_or_throw(const Manifest& m) {
  fs::path repo = locate_history_repo(m, /*create=*/false);
  if (repo.empty()) throw Error("no history yet: `forge build` commits accepted kernels");
  return repo;
}

const Target* captured(const BuildContext& ctx, const std::string& id) {
  for (const auto& t : ctx.targets)
    if (t.id == id) return &t;
  return nullptr;
}

BenchTime time_of(const json& t) {
  if (!t.is_object()) return {};
  return {t.value("median", 0.0), t.value("spread", 0.0)};
}

bool has_median(const json& t) {
  return t.is_object() && t["median"].is_number();
}

// rec[key] when it is an object, else {} (a rejected record's "bench" is null).
json object_at(const json& rec, const char* key) {
  return rec.contains(key) && rec[key].is_object() ? rec[key] : json::object();
}

// Evaluates a kernel read from history against its captured target. A kernel
// whose target is not captured, or that cannot be evaluated here (no family,
// another backend), gets a record with verdict "error" saying why.
json evaluate_kernel(EvalSession& s, const Target* target, const HistoryKernel& k,
                     const EvalSettings& settings, const Target* override_target = nullptr) {
  auto error = [&](const std::string& reason, const std::string& detail) {
    return json{{"candidate", k.file},
                {"target", k.target},
                {"verdict", "error"},
                {"reason", reason},
                {"detail", detail}};
  };
  if (!target)
    return error("not_captured",
                 "the target is not in `forge status` (not captured, or no "
                 "longer selected by forge.yaml)");
  auto lang = lang_of(k.file);
  if (!lang) return error("unknown_language", k.file + " is neither .cpp nor .cu");
  if (target_on_cuda(*target) != (*lang == CandidateLang::Cuda))
    return error("other_backend", std::string("the target was captured on ") +
                                      (target_on_cuda(*target) ? "CUDA" : "the CPU") +
                                      ", the kernel is for the other backend");
  std::string no_family;
  if (!family_for(s, *target, &no_family)) return error("no_family", no_family);
  start_evaluating(s);
  return evaluate_source(s, override_target ? *override_target : *target, {k.file, k.source, *lang},
                         settings);
}

// One row of the replay table: recorded beside now.
json replay_row(const HistoryKernel& k, const json& rec) {
  const json result = k.result.is_object() ? k.result : json::object();
  const json rec_bench = object_at(rec, "bench");
  const json recorded_us = result.value("candidate_us", json());
  const json now_us = rec_bench.value("candidate_us", json());
  json changed = nullptr;
  if (has_median(recorded_us) && has_median(now_us))
    changed = timing_changed(time_of(recorded_us), time_of(now_us));
  const std::string verdict = rec.value("verdict", "");
  return {
      {"target", k.target},
      {"kernel", k.file},
      {"status", verdict == "accepted"                       ? "verified"
                 : verdict == "rejected"                     ? "rejected"
                 : rec.value("reason", "") == "not_captured" ? "not_captured"
                                                             : "error"},
      {"recorded",
       {{"candidate_us", recorded_us}, {"speedup_eager", result.value("speedup_eager", json())}}},
      {"now",
       {{"verdict", verdict},
        {"reason", rec.value("reason", "")},
        {"detail", rec.value("detail", "")},
        {"candidate_us", now_us},
        {"eager_us", rec_bench.value("eager_us", json())},
        {"speedup_eager", rec_bench.value("speedup_eager", json())},
        {"cached", record_cached(rec)}}},
      {"changed", changed}};
}

std::string fmt(const char* pattern, const json& v) {
  if (!v.is_number()) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, pattern, v.get<double>());
  return buf;
}

std::string us_text(const json& t) {
  if (!has_median(t)) return "-";
  return fmt("%.1f", t["median"]) + " ±" + fmt("%.1f", t.value("spread", json(0.0)));
}

void print_replay(const HistoryCommit& at, const std::string& rev, const json& rows) {
  std::printf("replay %s (%s %s)\n", rev.c_str(), at.commit.substr(0, 7).c_str(),
              at.subject.c_str());
  // µ, ± and × are two bytes each: one more byte of width keeps the columns aligned.
  std::printf("%-36s %15s %15s %8s %8s  %-28s %-7s %s\n", "target", "recorded µs", "now µs", "rec×",
              "now×", "verdict now", "changed", "cached");
  for (const auto& r : rows) {
    const json& now = r["now"];
    std::string verdict = now.value("verdict", "");
    if (verdict == "error") verdict = r.value("status", "error");
    verdict += " (" + now.value("reason", "") + ")";
    const json& changed = r["changed"];
    const json& cached = now["cached"];
    std::printf("%-36s %15s %15s %7s %7s  %-28s %-7s %s\n", r.value("target", "").c_str(),
                us_text(r["recorded"]["candidate_us"]).c_str(),
                us_text(now["candidate_us"]).c_str(),
                fmt("%.2f", r["recorded"]["speedup_eager"]).c_str(),
                fmt("%.2f", now["speedup_eager"]).c_str(), verdict.c_str(),
                changed.is_boolean() ? (changed.get<bool>() ? "CHANGED" : "no") : "-",
                cached.is_boolean() ? (cached.get<bool>() ? "cached" : "ran") : "-");
    if (r.value("status", "") != "verified" && !now.value("detail", "").empty())
      std::printf("    %s\n", now.value("detail", "").c_str());
  }
}

// --fails-on FILE: the target with the file as the first tensor argument of
// its one sample (the capture's other arguments of sample 0 kept), so the
// worker's first case, "sample 0", is that input. The file is raw bytes as the
// capture writes samples: contiguous, in the argument's dtype, numel × size.
Target with_input(EvalSession& s, const Target& t, const fs::path& file) {
  size_t arg = t.args.size();
  for (size_t i = 0; i < t.args.size(); ++i)
    if (t.args[i].is_object() && t.args[i].value("type", "") == "Tensor") {
      arg = i;
      break;
    }
  if (arg == t.args.size()) throw Error(t.id + " has no tensor argument to replace");
  std::string bytes;
  if (!read_file(file, &bytes)) throw Error("cannot read " + file.string());
  const json& a = t.args[arg];
  const size_t elem = static_cast<size_t>(dtypes::bytes(a.value("dtype", "")));
  if (elem > 0 && a.contains("sizes")) {
    size_t numel = 1;
    for (const auto& d : a["sizes"]) numel *= d.get<size_t>();
    if (bytes.size() != numel * elem)
      throw UsageError(file.string() + " has " + std::to_string(bytes.size()) +
                       " bytes; argument " + a.value("name", std::to_string(arg)) + " of " + t.id +
                       " (" + a.value("dtype", "") + " " + a["sizes"].dump() + ") needs " +
                       std::to_string(numel * elem));
  }
  json entries = json::array();
  if (!t.sample_inputs.empty() && t.sample_inputs.is_array()) {
    const json& first = t.sample_inputs[0];
    entries = first.is_object() && first.contains("inputs") ? first["inputs"] : first;
  }
  if (!entries.is_array()) entries = json::array();
  while (entries.size() < t.args.size()) entries.push_back(nullptr);
  entries[arg] = {{"digest", s.ctx().builder.store().put_object(bytes)}};
  Target out = t;
  out.sample_inputs = json::array({{{"inputs", entries}}});
  out.samples = 1;
  return out;
}

}  // namespace

int cmd_replay(const Invocation& inv) {
  Args args = parse(inv, /*bisect=*/false);
  if (args.positional.size() > 2) throw UsageError(kReplayUsage);
  Manifest m = load_manifest(inv.dir / "forge.yaml");
  const fs::path repo = history_repo_or_throw(m);
  const std::string rev = args.positional.empty() ? m.history.ref : args.positional[0];
  const std::string prefix = args.positional.size() == 2 ? args.positional[1] : "";
  const HistoryCommit at = resolve_commit(repo, rev);
  std::vector<HistoryKernel> kernels;
  for (auto& k : kernels_at(repo, rev))
    if (k.target.starts_with(prefix)) kernels.push_back(std::move(k));
  if (kernels.empty())
    throw Error(prefix.empty() ? rev + " holds no kernels"
                               : "no kernel of a target '" + prefix + "*' in " + rev);

  auto s = open_eval_session(inv);
  EvalSettings settings;
  settings.timeout_seconds = args.timeout;
  json rows = json::array();
  bool all_verified = true;
  for (const auto& k : kernels) {
    json rec = evaluate_kernel(*s, captured(s->ctx(), k.target), k, settings);
    rows.push_back(replay_row(k, rec));
    all_verified = all_verified && rows.back()["status"] == "verified";
  }
  s->ctx().builder.progress().finish();
  if (inv.json)
    std::cout << json{{"rev", rev},
                      {"commit", at.commit},
                      {"subject", at.subject},
                      {"kernels", rows},
                      {"ok", all_verified}}
                     .dump(2)
              << "\n";
  else
    print_replay(at, rev, rows);
  return all_verified ? 0 : 1;
}

int cmd_bisect(const Invocation& inv) {
  Args args = parse(inv, /*bisect=*/true);
  if (args.positional.size() != 1 || args.slower_than.has_value() == args.fails_on.has_value())
    throw UsageError(kBisectUsage);
  Manifest m = load_manifest(inv.dir / "forge.yaml");
  const fs::path repo = history_repo_or_throw(m);

  auto s = open_eval_session(inv);
  const Target target = find_target(s->ctx(), args.positional[0]);
  // --fails-on: a file in the capture's sample format, else a verification case name.
  std::optional<Target> probe;
  std::string case_name = args.fails_on.value_or("");
  std::string predicate;
  if (args.slower_than) {
    predicate = "slower than " + fmt("%g", *args.slower_than) + " µs";
  } else if (std::error_code ec; fs::is_regular_file(fs::absolute(*args.fails_on), ec)) {
    probe = with_input(*s, target, fs::absolute(*args.fails_on));
    case_name = "sample 0";
    predicate = "rejected on input " + *args.fails_on;
  } else {
    predicate = "rejected on case '" + case_name + "'";
  }

  const std::vector<HistoryCommit> commits = commits_changing(repo, m.history.ref, target.id);
  EvalSettings settings;
  settings.timeout_seconds = args.timeout;
  json tested = json::array();
  auto test = [&](size_t i) {
    const HistoryCommit& c = commits[i];
    auto k = kernel_at(repo, c.commit, target.id);
    if (!k) throw Error("internal: " + c.commit + " has no kernel of " + target.id);
    json rec = evaluate_kernel(*s, &target, *k, settings, probe ? &*probe : nullptr);
    if (rec.value("verdict", "") == "error")
      throw Error("cannot evaluate " + target.id + " at " + c.commit.substr(0, 7) + ": " +
                  rec.value("reason", "") + ": " + rec.value("detail", ""));
    const json now_us = object_at(rec, "bench").value("candidate_us", json());
    bool yes;
    std::string what;
    if (args.slower_than) {
      // A rejected kernel is not timed: it counts as not slower (say so).
      yes = has_median(now_us) && now_us["median"].get<double>() > *args.slower_than;
      what = has_median(now_us) ? us_text(now_us) + " µs"
                                : "rejected (" + rec.value("reason", "") + "), not timed";
    } else {
      yes = rejected_on_case(rec, case_name);
      what = rec.value("verdict", "") + " (" + rec.value("reason", "") + ")";
    }
    const json cached = record_cached(rec);
    tested.push_back({{"commit", c.commit},
                      {"subject", c.subject},
                      {"kernel", k->file},
                      {"verdict", rec.value("verdict", "")},
                      {"reason", rec.value("reason", "")},
                      {"detail", rec.value("detail", "")},
                      {"candidate_us", now_us},
                      {"cached", cached},
                      {"predicate", yes}});
    if (!inv.json) {
      std::printf("  %s %s: %s -> %s%s\n", c.commit.substr(0, 7).c_str(), k->file.c_str(),
                  what.c_str(), yes ? "yes" : "no",
                  cached.is_boolean() && cached.get<bool>() ? " (cached)" : "");
      std::fflush(stdout);
    }
    return yes;
  };
  if (!inv.json)
    std::printf("bisect %s: %zu commit%s changed its kernel; looking for the first %s\n",
                target.id.c_str(), commits.size(), commits.size() == 1 ? "" : "s",
                predicate.c_str());
  const size_t first = first_true(commits.size(), test);
  s->ctx().builder.progress().finish();
  const bool found = first < commits.size();
  if (inv.json) {
    json f = found ? json{{"commit", commits[first].commit}, {"subject", commits[first].subject}}
                   : json(nullptr);
    std::cout << json{{"target", target.id},
                      {"predicate", predicate},
                      {"commits", commits.size()},
                      {"tested", tested},
                      {"found", f}}
                     .dump(2)
              << "\n";
  } else if (found) {
    std::printf("first commit %s: %s %s\n", predicate.c_str(), commits[first].commit.c_str(),
                commits[first].subject.c_str());
  } else {
    std::printf("no commit of %s is %s\n", target.id.c_str(), predicate.c_str());
  }
  return found ? 0 : 1;
}

}  // namespace forge::cli
