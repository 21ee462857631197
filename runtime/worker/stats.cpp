#include "stats.h"

#include <algorithm>
#include <cmath>

namespace forge::worker {
namespace {

double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0.0;
  double pos = p * static_cast<double>(sorted.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(pos));
  size_t hi = std::min(lo + 1, sorted.size() - 1);
  double frac = pos - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

}  // namespace

Summary summarize(std::vector<double> samples) {
  Summary s;
  s.reps = static_cast<int>(samples.size());
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  s.min = samples.front();
  s.median = percentile(samples, 0.5);
  s.q1 = percentile(samples, 0.25);
  s.q3 = percentile(samples, 0.75);
  s.iqr = s.q3 - s.q1;
  return s;
}

double binomial_upper_tail(int n, int k) {
  if (k <= 0) return 1.0;
  if (k > n) return 0.0;
  // Terms C(n, j) / 2^n for j >= k; past the mode they only shrink, so the sum
  // stops once a term no longer changes it.
  const double log_half_n = n * std::log(0.5);
  auto log_term = [&](int j) { return std::lgamma(n + 1.0) - std::lgamma(j + 1.0) - std::lgamma(n - j + 1.0) + log_half_n; };
  double sum = 0;
  for (int j = k; j <= n; ++j) {
    const double t = std::exp(log_term(j));
    sum += t;
    if (j > n / 2 && t < sum * 1e-17) break;
  }
  return std::min(1.0, sum);
}

FasterDecision decide_faster(const std::vector<double>& cand, const std::vector<double>& eager,
                             const FasterRule& rule) {
  FasterDecision d;
  d.rounds = static_cast<int>(std::min(cand.size(), eager.size()));
  if (d.rounds == 0) return d;
  for (int i = 0; i < d.rounds; ++i)
    if (cand[i] * (1 + rule.min_effect) < eager[i]) ++d.wins;
  d.p = binomial_upper_tail(d.rounds, d.wins);
  const Summary c = summarize(cand), e = summarize(eager);
  d.faster = d.p < rule.alpha && c.median * (1 + rule.min_effect) < e.median;
  return d;
}

}  // namespace forge::worker
