// The per-evaluation limit (rules/evaluate/timeout.h).
#include <doctest/doctest.h>

#include "rules/evaluate/timeout.h"

namespace forge {

TEST_SUITE_BEGIN("rules::EvalTimeout");

TEST_CASE("a small call gets the base limit exactly") {
  CHECK(eval_timeout::scaled(0) == eval_timeout::kBaseSeconds);
  CHECK(eval_timeout::scaled(-1) == eval_timeout::kBaseSeconds);
  CHECK(eval_timeout::scaled(256'000) == eval_timeout::kBaseSeconds);  // _softmax [64,1000] f32, in and out
  CHECK(eval_timeout::scaled(eval_timeout::kBytesPerSecond - 1) == eval_timeout::kBaseSeconds);
}

TEST_CASE("the limit grows with the bytes the call moves, in whole seconds, up to the cap") {
  CHECK(eval_timeout::scaled(eval_timeout::kBytesPerSecond) == eval_timeout::kBaseSeconds + 1);
  CHECK(eval_timeout::scaled(1e9) == 160);
  // KernelBench's softmax at 4096 x 393216 float32: 6.4 GB in, 6.4 GB out.
  const double softmax = 2.0 * 4096 * 393216 * 4;
  CHECK(eval_timeout::scaled(softmax) == doctest::Approx(60 + 1288));
  CHECK(eval_timeout::scaled(softmax) > 1000);  // the fixed 60 s ran out on the H200
  CHECK(eval_timeout::scaled(1e15) == eval_timeout::kMaxSeconds);
  for (double b = 1; b < 1e14; b *= 3) CHECK(eval_timeout::scaled(b * 3) >= eval_timeout::scaled(b));
}

TEST_CASE("an explicit limit wins, smaller or larger") {
  CHECK(eval_timeout::limit(std::nullopt, 1e9) == 160);
  CHECK(eval_timeout::limit(5.0, 1e9) == 5.0);
  CHECK(eval_timeout::limit(7200.0, 0) == 7200.0);
}

TEST_SUITE_END();

}  // namespace forge
