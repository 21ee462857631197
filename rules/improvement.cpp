#include "rules/improvement.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "engine/store_json.h"

namespace forge {
using nlohmann::json;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// P(U <= u) under the null hypothesis (every ordering of the n + m values
// equally likely), U counting pairs (tip, challenger) with the challenger not
// below the tip. Exact, by counting orderings: cnt[i][j][k] = orderings of i
// tip and j challenger values with k such pairs (ties are scored 1/2 in U
// and conservatively rounded up here).
double mann_whitney_p(size_t n, size_t m, double u) {
  const size_t kmax = n * m;
  // f[j][k] for the current i; built up row by row.
  std::vector<std::vector<std::vector<double>>> f(n + 1, std::vector<std::vector<double>>(m + 1, std::vector<double>(kmax + 1, 0)));
  f[0][0][0] = 1;
  for (size_t i = 0; i <= n; ++i)
    for (size_t j = 0; j <= m; ++j)
      for (size_t k = 0; k <= kmax; ++k) {
        if (i == 0 && j == 0) continue;
        double c = 0;
        // The largest value is a tip's: every challenger below it (0 pairs added).
        if (i > 0) c += f[i - 1][j][k];
        // The largest value is a challenger's: it is not below any of the i tips.
        if (j > 0 && k >= i) c += f[i][j - 1][k - i];
        f[i][j][k] = c;
      }
  double total = 0, below = 0;
  const double limit = std::ceil(u - 1e-9);
  for (size_t k = 0; k <= kmax; ++k) {
    total += f[n][m][k];
    if (static_cast<double>(k) <= limit) below += f[n][m][k];
  }
  return total > 0 ? below / total : 1.0;
}

std::string fmt(const char* f, double a, double b, double c) {
  char buf[200];
  std::snprintf(buf, sizeof buf, f, a, b, c);
  return buf;
}

}  // namespace

BenchTime candidate_time(const json& rec) {
  const json c = rec.value("bench", json::object()).value("candidate_us", json::object());
  return {c.value("median", 0.0), c.value("spread", 0.0)};
}

json RaceRule::to_json() const { return {{"rounds", rounds}, {"min_effect", min_effect}, {"alpha", alpha}}; }

RaceDecision decide_race(const std::vector<double>& tip, const std::vector<double>& challenger,
                         const RaceRule& rule) {
  RaceDecision d;
  if (tip.empty() || challenger.empty()) {
    d.why = "no race rounds";
    return d;
  }
  for (double t : tip)
    for (double c : challenger) d.u += c > t ? 1.0 : c == t ? 0.5 : 0.0;
  d.p = mann_whitney_p(tip.size(), challenger.size(), d.u);
  const double mt = median(tip), mc = median(challenger);
  d.effect = mt > 0 ? 1.0 - mc / mt : 0.0;
  const bool significant = d.p <= rule.alpha, large = d.effect >= rule.min_effect;
  d.challenger_wins = significant && large;
  d.why = fmt("challenger %.1f%% faster than the tip (median time ratios), rank test p = %.3f", 100 * d.effect, d.p, 0) +
          (d.challenger_wins ? ": ships"
           : !significant    ? ": not significant at alpha " + fmt("%.2f", rule.alpha, 0, 0)
                             : ": below the minimum effect " + fmt("%.0f%%", 100 * rule.min_effect, 0, 0));
  return d;
}

std::vector<size_t> improvement_chain(const std::vector<ChainEntry>& kernels) {
  std::vector<size_t> chain;
  for (size_t i = 0; i < kernels.size(); ++i) {
    if (!chain.empty()) {
      const ChainEntry& tip = kernels[chain.back()];
      const ChainEntry& k = kernels[i];
      if (k.race.is_object() && k.race.value("tip", "") == tip.evaluation) {
        if (!k.race.value("challenger_wins", false)) continue;
      } else if (tip.time.median - k.time.median <= tip.time.spread + k.time.spread) {
        continue;  // no race against this tip: the rule of records from before races
      }
    }
    chain.push_back(i);
  }
  return chain;
}

bool load_chain_entry(store::Store& store, const std::string& evaluation, const std::string& race,
                      ChainEntry* entry, json* record) {
  json rec = get_json_object(store, evaluation);
  if (!rec.is_object()) return false;
  entry->evaluation = evaluation;
  entry->time = candidate_time(rec);
  entry->race = race.empty() ? json() : get_json_object(store, race);
  if (!entry->race.is_object()) entry->race = json();
  if (record) *record = std::move(rec);
  return true;
}

std::optional<size_t> shipped_kernel_index(store::Store& store, const Target& t, std::vector<json>* records) {
  std::vector<ChainEntry> entries;
  records->clear();
  for (const auto& k : t.kernels) {
    ChainEntry e;
    json rec;
    if (!load_chain_entry(store, k.evaluation, k.race, &e, &rec)) return std::nullopt;
    entries.push_back(std::move(e));
    records->push_back(std::move(rec));
  }
  auto chain = improvement_chain(entries);
  if (chain.empty()) return std::nullopt;
  return chain.back();
}

}  // namespace forge
