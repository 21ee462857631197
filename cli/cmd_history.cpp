#include "cli/cmd_history.h"

#include <cstdio>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/manifest.h"
#include "rules/history/repo.h"
#include "util/error.h"

namespace forge::cli {
using nlohmann::json;

namespace {

// Message fields are text; JSON readers want numbers where they are numbers.
json number_or_null(const std::string& s) {
  try {
    size_t used = 0;
    double v = std::stod(s, &used);
    if (used == s.size()) return v;
  } catch (const std::exception&) {
  }
  return nullptr;
}

std::string fmt_speedup(const json& v) {
  if (!v.is_number()) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v.get<double>());
  return buf;
}

}  // namespace

int cmd_log(const Invocation& inv) {
  if (inv.args.size() > 1) throw UsageError("usage: forge log [TARGET]");
  const std::string prefix = inv.args.empty() ? "" : inv.args[0];
  Manifest m = load_manifest(inv.dir / "forge.yaml");
  std::filesystem::path repo = locate_history_repo(m, /*create=*/false);
  std::vector<HistoryCommit> commits;
  if (!repo.empty()) commits = read_history(repo, m.history.ref);
  json list = json::array();
  for (const auto& c : commits) {
    auto field = [&](const char* k) { return c.fields.count(k) ? c.fields.at(k) : ""; };
    if (!field("target").starts_with(prefix) || field("target").empty()) continue;
    list.push_back({{"commit", c.commit},
                    {"target", field("target")},
                    {"speedup_eager", number_or_null(field("speedup_eager"))},
                    {"proposer", field("proposer")},
                    {"iteration", number_or_null(field("iteration"))},
                    {"subject", c.subject}});
  }
  if (inv.json) {
    std::cout << list.dump(2) << "\n";
    return 0;
  }
  if (list.empty()) {
    std::printf("no history for %s in %s\n", prefix.empty() ? "any target" : prefix.c_str(),
                m.history.ref.c_str());
    return 0;
  }
  for (const auto& e : list)
    std::printf("%s %-36s %8sx  %s\n", e["commit"].get<std::string>().substr(0, 7).c_str(),
                e["target"].get<std::string>().c_str(),
                fmt_speedup(e["speedup_eager"]).c_str(),
                e["proposer"].get<std::string>().c_str());
  return 0;
}

int cmd_diff(const Invocation& inv) {
  if (inv.args.size() != 2) throw UsageError("usage: forge diff A B");
  Manifest m = load_manifest(inv.dir / "forge.yaml");
  std::filesystem::path repo = locate_history_repo(m, /*create=*/false);
  if (repo.empty()) throw Error("no history yet: `forge build` commits accepted kernels");
  std::string diff = diff_history(repo, inv.args[0], inv.args[1]);
  if (inv.json)
    std::cout << json{{"from", inv.args[0]}, {"to", inv.args[1]}, {"diff", diff}}.dump(2) << "\n";
  else
    std::fputs(diff.c_str(), stdout);
  return 0;
}

}  // namespace forge::cli
