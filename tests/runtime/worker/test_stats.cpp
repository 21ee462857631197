// The benchmark's `faster` rule (runtime/worker/stats.h) on simulated rounds:
// a fake clock gives each round a true time times noise that hits candidate
// and stock alike (load that comes and goes) and noise of its own.
#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include "runtime/worker/stats.h"

namespace forge::worker {

TEST_SUITE_BEGIN("runtime::Stats");

namespace {

struct Rounds {
  std::vector<double> cand, eager;
};

// `n` rounds of a candidate `speedup` times faster than a 200 us stock call:
// each round shares a load factor (1x..3x, heavy on a busy 2-core machine)
// and each call has its own jitter (lognormal, `jitter` sigma).
Rounds simulate(double speedup, int n, double jitter, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> load(1.0, 3.0);
  std::lognormal_distribution<double> noise(0.0, jitter);
  Rounds r;
  for (int i = 0; i < n; ++i) {
    const double l = load(rng);
    r.eager.push_back(200.0 * l * noise(rng));
    r.cand.push_back(200.0 / speedup * l * noise(rng));
  }
  return r;
}

int wins_over_seeds(double speedup, int n, double jitter, int seeds) {
  int faster = 0;
  for (int s = 0; s < seeds; ++s) {
    const Rounds r = simulate(speedup, n, jitter, 1000 + s);
    faster += decide_faster(r.cand, r.eager).faster;
  }
  return faster;
}

}  // namespace

TEST_CASE("the binomial tail is exact at small n and sane at large n") {
  CHECK(binomial_upper_tail(10, 0) == 1.0);
  CHECK(binomial_upper_tail(10, 11) == 0.0);
  CHECK(binomial_upper_tail(10, 10) == doctest::Approx(1.0 / 1024));
  CHECK(binomial_upper_tail(10, 8) == doctest::Approx(56.0 / 1024));  // 45 + 10 + 1
  CHECK(binomial_upper_tail(30, 20) == doctest::Approx(0.0494).epsilon(0.01));
  CHECK(binomial_upper_tail(100000, 50000) == doctest::Approx(0.5).epsilon(0.01));
  CHECK(binomial_upper_tail(100000, 51000) < 1e-9);
}

TEST_CASE("1.2x faster under heavy shared load is faster in every trial") {
  // The load moves both contenders by up to 3x; pairing cancels it, where
  // comparing the two medians beyond both spreads would not.
  CHECK(wins_over_seeds(1.2, 30, 0.05, 50) == 50);
  const Rounds r = simulate(1.2, 30, 0.05, 7);
  const Summary c = summarize(r.cand), e = summarize(r.eager);
  CHECK_FALSE(e.median - c.median > c.iqr + e.iqr);  // the unpaired rule misses it
}

TEST_CASE("equal kernels are not faster: false positives stay below alpha") {
  CHECK(wins_over_seeds(1.0, 30, 0.05, 200) <= 10);  // alpha 0.05 of 200 trials
  CHECK(wins_over_seeds(1.0, 30, 0.3, 200) <= 10);
  CHECK(wins_over_seeds(1.0, 2000, 0.3, 50) <= 3);
}

TEST_CASE("a gain below the minimum effect is not faster, however many rounds") {
  CHECK(wins_over_seeds(1.02, 5000, 0.02, 20) == 0);
  CHECK(wins_over_seeds(1.10, 5000, 0.02, 20) == 20);
}

TEST_CASE("the decision reports its test; no rounds is not faster") {
  const FasterDecision none = decide_faster({}, {});
  CHECK_FALSE(none.faster);
  CHECK(none.rounds == 0);
  const FasterDecision d = decide_faster({100, 100, 100, 100, 100, 100}, {200, 200, 200, 200, 200, 200});
  CHECK(d.wins == 6);
  CHECK(d.rounds == 6);
  CHECK(d.p == doctest::Approx(1.0 / 64));
  CHECK(d.faster);
  // Four rounds can never reach p < 0.05 (4 of 4: 1/16); five can (1/32).
  CHECK(decide_faster({1, 1, 1, 1}, {2, 2, 2, 2}).p == doctest::Approx(1.0 / 16));
  CHECK_FALSE(decide_faster({1, 1, 1, 1}, {2, 2, 2, 2}).faster);
}

TEST_SUITE_END();
}  // namespace forge::worker
