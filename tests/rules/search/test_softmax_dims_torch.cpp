// The softmax family beyond its campaign shapes (issue 32): log_softmax, and
// softmax / log_softmax over a dim that is not the last (the `columns`
// templates), on the CPU. A script with each (tests/rules/search/softmax/
// model.py) is captured and built with one candidate per target; each is
// verified against stock on captured and fresh inputs, ranges and specials
// (-inf rows, causal masks, NaN, +inf), and accepted. Correctness only.
// Skipped (visibly) without torch.
#include <doctest/doctest.h>

#include <map>

#include <nlohmann/json.hpp>

#include "tests/rules/search/library_build.h"

namespace forge {
using nlohmann::json;

TEST_SUITE_BEGIN("rules::SoftmaxDims");

TEST_CASE("log_softmax and softmax over any dim: the row and columns templates verify") {
  FORGE_SKIP_WITHOUT_TORCH();
  test::TempDir dir;
  json r = test::build_library_script("softmax", dir);
  std::map<std::string, int> strategies;  // "op strategy" -> accepted targets
  for (const auto& t : r["targets"]) {
    const std::string op = t["op"];
    if (op != "_softmax" && op != "_log_softmax") continue;
    CAPTURE(t.dump());
    CHECK(t["selection"] == "selected");
    CHECK(t["verified"].get<int>() == 1);
    const std::string s = t["best_strategy"].is_string() ? t["best_strategy"].get<std::string>() : "";
    strategies[op + " " + s.substr(0, s.find(' '))] += t["verified"].get<int>();
  }
  CAPTURE(json(strategies).dump());
  CHECK(strategies["_log_softmax rows_3pass"] == 1);  // the last dim
  CHECK(strategies["_log_softmax columns"] == 1);     // dim 0
  CHECK(strategies["_softmax columns"] == 2);         // dim 1, float32 and bfloat16
}

TEST_SUITE_END();
}  // namespace forge
