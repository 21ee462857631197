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

bool is_faster(const Summary& cand, const Summary& eager) {
  if (cand.reps == 0 || eager.reps == 0) return false;
  return eager.median - cand.median > cand.iqr + eager.iqr;
}

}  // namespace forge::worker
