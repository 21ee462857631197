// The end-to-end verdict that leaves a model's kernels out of the package:
// slower only when every run with the library was slower than every run
// without it, and the medians are more than 1% apart.
#include <doctest/doctest.h>

#include "rules/package/package.h"

namespace forge {

TEST_SUITE_BEGIN("rules::PackageVerdict");

TEST_CASE("slower: every forged run slower and the medians more than 1% apart, 3 runs or more") {
  CHECK(ran_slower({8.4, 8.5, 8.6}, {10.8, 10.9, 11.0}));
  CHECK(ran_slower({1.0, 1.0, 1.01}, {1.03, 1.05, 1.04}));
  // 2 runs each way, as the Gemma-like campaign's check had (PERF.md run I,
  // I7; figures illustrative): chance alone orders them so one time in 6.
  CHECK_FALSE(ran_slower({8.32, 8.33}, {9.0, 9.03}));
}

TEST_CASE("not slower: overlapping runs, a gap under 1%, faster, or nothing measured") {
  CHECK_FALSE(ran_slower({8.4, 11.0}, {10.8, 10.9}));    // one stock run slower than a forged one
  CHECK_FALSE(ran_slower({1.000, 1.001}, {1.002, 1.005})); // every run slower, by 0.3%
  CHECK_FALSE(ran_slower({10.8, 10.9}, {8.4, 8.6}));     // faster
  CHECK_FALSE(ran_slower({}, {1.0}));
  CHECK_FALSE(ran_slower({1.0}, {}));
}

TEST_SUITE_END();

}  // namespace forge
