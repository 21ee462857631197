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

// `faster` of the protocol: a paired test of fixed size (the rounds the
// benchmark ran, decided before any outcome). Round i timed the candidate
// (cand[i]) and stock (eager[i]) on the same fresh content, in random order,
// so load that comes and goes hits both. The candidate wins round i when
//   cand[i] * (1 + min_effect) < eager[i]
// and is faster when the exact one-sided sign test puts its wins above chance
// (binomial tail, p < alpha) AND its median is min_effect below stock's: the
// test keeps noise from reading as a win, the effect keeps a negligible gain
// from counting as one.
struct FasterRule {
  double min_effect = 0.05;
  double alpha = 0.05;
};

struct FasterDecision {
  bool faster = false;
  int wins = 0, rounds = 0;
  double p = 1;  // P(at least `wins` of `rounds` | each round a coin flip)
};

FasterDecision decide_faster(const std::vector<double>& cand, const std::vector<double>& eager,
                             const FasterRule& rule = {});

// P(X >= k) for X ~ Binomial(n, 1/2), exact (summed in log space).
double binomial_upper_tail(int n, int k);

}  // namespace forge::worker
