// Benchmark statistics: median and interquartile range, and the rule that says
// whether a candidate is faster than the stock kernel. Torch-free.
#pragma once

#include <vector>

namespace forge::worker {

struct Summary {
  double median = 0;
  double q1 = 0;   // 25th percentile
  double q3 = 0;   // 75th percentile
  double iqr = 0;  // q3 - q1: the "spread" of the protocol
  double min = 0;
  int reps = 0;
};

// Percentiles by linear interpolation between order statistics.
Summary summarize(std::vector<double> samples);

// `faster` of the protocol: the candidate's median is below the stock median
// by more than the two spreads added together,
//   eager.median - cand.median > cand.iqr + eager.iqr
// (equivalently cand.median + cand.iqr < eager.median - eager.iqr). Conservative
// on purpose: noise large enough to reorder the middle halves of the two
// distributions never reads as a win.
bool is_faster(const Summary& cand, const Summary& eager);

}  // namespace forge::worker
