// Chains that are a module class's whole forward (chains.h, find_forward_chains).
#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <set>

#include "rules/capture/chains.h"

namespace forge {
namespace {
using nlohmann::json;

// The classes of a module path ("__main__.Block/__main__.RMSNorm").
std::vector<std::string> classes_of(const std::string& path) {
  std::vector<std::string> out;
  for (size_t at = 0; at <= path.size();) {
    const size_t slash = std::min(path.find('/', at), path.size());
    if (slash > at) out.push_back(path.substr(at, slash - at));
    at = slash + 1;
  }
  return out;
}

bool ran_under(const std::string& path, const std::string& cls) {
  const auto c = classes_of(path);
  return std::find(c.begin(), c.end(), cls) != c.end();
}

struct Flow {
  int from, to;
  long out, calls;
};

// One connected group of a class's kernels as a chain, or nullopt when it is
// none: one call count, one op whose output leaves the group (the last), every
// other op's outputs read by the group alone, each read on every call, each
// produced fresh on every call, no cycle (signature-shared entries can make one).
std::optional<Chain> group_chain(const json& entries, const std::vector<int>& group, const std::vector<Flow>& flows,
                                 const std::map<std::pair<int, long>, long>& produced) {
  const std::set<int> in(group.begin(), group.end());
  auto calls_of = [&](int i) { return entries[static_cast<size_t>(i)].value("calls", 0L); };
  const long calls = calls_of(group.front());
  for (int i : group)
    if (calls_of(i) != calls || calls <= 0) return std::nullopt;
  std::map<int, std::set<int>> succ;
  std::map<int, int> indegree;
  std::map<int, bool> leaves;  // an op with a flow out of the group
  for (const Flow& f : flows) {
    if (!in.count(f.from)) continue;
    if (!in.count(f.to)) {
      leaves[f.from] = true;
      continue;
    }
    if (f.from == f.to || f.calls != calls) return std::nullopt;
    const auto p = produced.find({f.from, f.out});
    if (p == produced.end() || p->second != calls) return std::nullopt;
    if (succ[f.from].insert(f.to).second) ++indegree[f.to];
  }
  int sinks = 0;
  for (int i : group) {
    if (succ[i].empty()) ++sinks;
    else if (leaves[i]) return std::nullopt;  // an intermediate read outside the group
  }
  if (sinks != 1) return std::nullopt;
  // Kahn's order, the lowest entry first among the ready ones (deterministic).
  std::set<int> ready;
  for (int i : group)
    if (indegree[i] == 0) ready.insert(i);
  Chain ch;
  while (!ready.empty()) {
    const int i = *ready.begin();
    ready.erase(ready.begin());
    append_entry(ch, i, entries[static_cast<size_t>(i)]);
    for (int j : succ[i])
      if (--indegree[j] == 0) ready.insert(j);
  }
  if (ch.entries.size() != group.size()) return std::nullopt;  // a cycle
  ch.calls = calls;
  ch.whole_forward = true;
  return ch;
}

}  // namespace

std::vector<Chain> find_forward_chains(const json& record, const std::string& backend) {
  const json& entries = record.contains("entries") ? record["entries"] : json::array();
  const int n = static_cast<int>(entries.size());
  std::map<std::string, std::set<int>> under;  // class -> entries with a call under one of its instances
  for (int i = 0; i < n; ++i) {
    const json& e = entries[static_cast<size_t>(i)];
    const std::string kind = e.value("kind", "kernel");
    if (kind == "view" || kind == "alloc") continue;
    const json mods = e.value("modules", json::object());
    for (const auto& [path, calls] : mods.items())
      for (const auto& cls : classes_of(path)) under[cls].insert(i);
  }
  std::vector<Flow> flows;
  for (const auto& f : record.value("flows", json::array())) {
    const int a = f.value("from", -1), b = f.value("to", -1);
    if (a >= 0 && b >= 0 && a < n && b < n && f.value("calls", 0L) > 0)
      flows.push_back({a, b, f.value("out", 0L), f.value("calls", 0L)});
  }
  std::map<std::pair<int, long>, long> produced;
  for (const auto& p : record.value("produced", json::array()))
    produced[{p.value("entry", -1), p.value("out", 0L)}] += p.value("tensors", 0L);

  std::vector<Chain> out;
  for (const auto& [cls, members] : under) {
    bool usable = true;
    for (int i : members) {
      const json& e = entries[static_cast<size_t>(i)];
      usable = usable && chain_op_eligible(e, backend);
      const json mods = e.value("modules", json::object());
      for (const auto& [path, calls] : mods.items()) usable = usable && ran_under(path, cls);
    }
    if (!usable || members.size() < 2) continue;
    // Groups connected by data flow (union-find over the members).
    std::map<int, int> parent;
    for (int i : members) parent[i] = i;
    auto root = [&](int i) {
      while (parent[i] != i) i = parent[i] = parent[parent[i]];
      return i;
    };
    for (const Flow& f : flows)
      if (members.count(f.from) && members.count(f.to)) parent[root(f.from)] = root(f.to);
    std::map<int, std::vector<int>> groups;
    for (int i : members) groups[root(i)].push_back(i);
    std::vector<Chain> found;
    for (const auto& [_, group] : groups) {
      auto ch = group_chain(entries, group, flows, produced);
      // Every group must be the same forward: another op sequence is another
      // code path (a side computation, a branch), so no group is the whole forward.
      if (!ch || (!found.empty() && ch->ops != found.front().ops)) {
        found.clear();
        break;
      }
      found.push_back(std::move(*ch));
    }
    for (Chain& ch : found) {
      if (ch.entries.size() < 2) continue;
      // The module: the path most calls of the last op ran under, up to the class.
      const std::string path = entries[static_cast<size_t>(ch.entries.back())].value("module", "");
      const auto parts = classes_of(path);
      std::string module;
      for (const auto& p : parts) {
        module += (module.empty() ? "" : "/") + p;
        if (p == cls) break;
      }
      ch.module = module;
      out.push_back(std::move(ch));
    }
  }
  // A chain found under a class and under its parent (whose forward is the
  // child's) keeps the deeper module.
  std::sort(out.begin(), out.end(), [](const Chain& x, const Chain& y) {
    return x.entries != y.entries ? x.entries < y.entries : x.module.size() > y.module.size();
  });
  out.erase(std::unique(out.begin(), out.end(), [](const Chain& x, const Chain& y) { return x.entries == y.entries; }),
            out.end());
  return out;
}

}  // namespace forge
