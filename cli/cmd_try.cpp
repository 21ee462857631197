// `forge try`: a user-supplied candidate against a captured target.
#include "cli/cmd_try.h"

#include <cmath>
#include <cstdio>
#include <iostream>
#include <optional>

#include "cli/evaluation.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace forge::cli {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const char* kUsage = "usage: forge try TARGET FILE [--json] [--timeout SECONDS]";

struct TryArgs {
  std::string target;
  fs::path file;
  std::optional<double> timeout;  // unset: grows with the target's bytes (rules/evaluate/timeout.h)
};

TryArgs parse(const Invocation& inv) {
  TryArgs a;
  std::vector<std::string> positional;
  for (size_t i = 0; i < inv.args.size(); ++i) {
    const std::string& s = inv.args[i];
    if (s == "--timeout") {
      if (i + 1 >= inv.args.size()) throw UsageError("--timeout needs a number of seconds");
      const std::string& v = inv.args[++i];
      try {
        size_t used = 0;
        a.timeout = std::stod(v, &used);
        if (used != v.size() || !(*a.timeout > 0)) throw std::invalid_argument(v);
      } catch (const std::exception&) {
        throw UsageError("--timeout needs a positive number of seconds, got '" + v + "'");
      }
    } else if (!s.empty() && s[0] == '-' && s != "-") {
      throw UsageError("unknown option '" + s + "' for 'try'");
    } else {
      positional.push_back(s);
    }
  }
  if (positional.size() != 2) throw UsageError(kUsage);
  a.target = positional[0];
  a.file = positional[1];
  return a;
}

CandidateLang lang_of_or_throw(const fs::path& file) {
  if (auto lang = lang_of(file)) return *lang;
  throw UsageError("'" + file.string() +
                   "' is neither a .cpp (CPU backend) nor a .cu (CUDA backend) candidate");
}

std::string us(const json& v) {
  if (!v.is_number()) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f µs", v.get<double>());
  return buf;
}

std::string stat_text(const json& s) {
  if (!s.is_object()) return "-";
  std::string t = us(s["median"]);
  if (s.contains("spread") && s["spread"].is_number()) t += " ±" + us(s["spread"]);
  return t;
}

void print_record(const json& r, const Target& t) {
  std::printf("try %s on %s\n", r.value("file", "").c_str(), t.id.c_str());
  std::printf("  signature  %s\n", t.signature.c_str());
  std::printf("  verdict    %s (%s)\n", r.value("verdict", "").c_str(),
              r.value("reason", "").c_str());
  if (!r.value("detail", "").empty())
    std::printf("  detail     %s\n", r.value("detail", "").c_str());
  for (const auto& v : r.value("static", json::array()))
    std::printf("  static     %s, line %d: %s\n             %s\n", v.value("rule", "").c_str(),
                v.value("line", 0), v.value("text", "").c_str(), v.value("rationale", "").c_str());
  if (r.contains("compile")) {
    const json& c = r["compile"];
    std::printf("  compile    %s, %.2f s%s\n", c.value("ok", false) ? "ok" : "failed",
                c.value("seconds", 0.0), c.value("cached", false) ? " (cached)" : "");
    const std::string log = c.value("log", "");
    if (!log.empty()) {
      std::printf("  compiler output:\n");
      std::fwrite(log.data(), 1, log.size(), stdout);
      if (log.back() != '\n') std::printf("\n");
    }
  }
  if (r.contains("verify") && r["verify"].is_object() && r["verify"].contains("cases")) {
    const json& v = r["verify"];
    std::printf(
        "  verify     %d cases, worst abs %.3g, worst rel %.3g%s\n", v.value("cases", 0),
        v.value("worst_abs", 0.0), v.value("worst_rel", 0.0),
        v.value("worst_case", "").empty() ? "" : (" (" + v.value("worst_case", "") + ")").c_str());
  }
  const json bench = r.value("bench", json());
  const json base = r.value("baseline", json::object());
  std::string speedup = "-";
  if (bench.is_object() && bench["speedup_eager"].is_number()) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f×", bench["speedup_eager"].get<double>());
    speedup = buf;
  }
  if (bench.is_object())
    std::printf("  timings    candidate %s | eager (stock, same inputs) %s | %s eager%s\n",
                stat_text(bench["candidate_us"]).c_str(), stat_text(bench["eager_us"]).c_str(),
                speedup.c_str(), bench.value("faster", false) ? ", faster" : "");
  else
    std::printf("  timings    - (only candidates that pass verification are timed)\n");
  const json captured = base.value("captured_us", json());
  std::printf("  baselines  eager as captured %s | torch.compile - (not measured yet)\n",
              captured.is_number() ? (us(captured) + " per call").c_str() : "- (not timed)");
  if (bench.is_object() && bench["floor_pct"].is_number())
    std::printf("  floor      %.0f%% of the copy-ceiling bound\n",
                bench["floor_pct"].get<double>());
  if (r.contains("evaluation"))
    std::printf("  evaluated  in %.2f s%s\n", r["evaluation"].value("seconds", 0.0),
                r["evaluation"].value("cached", false) ? " (cached)" : "");
}

}  // namespace

int cmd_try(const Invocation& inv) {
  TryArgs args = parse(inv);
  const fs::path file = fs::absolute(args.file);
  const CandidateLang lang = lang_of_or_throw(file);
  std::string text;
  if (!read_file(file, &text)) throw Error("cannot read " + file.string());

  auto s = open_eval_session(inv);
  BuildContext& ctx = s->ctx();
  const Target target = find_target(ctx, args.target);
  const bool cuda = target_on_cuda(target);
  if (cuda != (lang == CandidateLang::Cuda))
    throw UsageError(args.file.string() + " is a " +
                     (lang == CandidateLang::Cuda ? "CUDA" : "C++") + " candidate but " +
                     target.id + " was captured on " +
                     (cuda ? "CUDA (write a .cu)" : "the CPU (write a .cpp)"));
  std::string no_family;
  if (!family_for(*s, target, &no_family)) throw Error(target.id + ": " + no_family);

  // From here on, steps run: the worker build, the compile, the evaluation.
  start_evaluating(*s);
  EvalSettings settings;
  settings.timeout_seconds = args.timeout;
  json record = evaluate_source(*s, target, {file.filename().string(), text, lang}, settings);
  record["file"] = args.file.string();
  record["signature"] = target.signature;
  ctx.builder.progress().finish();
  if (inv.json)
    std::cout << record.dump(2) << "\n";
  else
    print_record(record, target);
  return record.value("verdict", "") == "accepted" ? 0 : 1;
}

}  // namespace forge::cli
