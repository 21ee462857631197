// The softmax family beyond its campaign shapes (issue 32): log_softmax, and
// softmax / log_softmax over a dim that is not the last (the `columns`
// templates), on the CPU. A script with each (tests/rules/search/softmax/
// model.py) is captured and built with one candidate per target; each is
// verified against stock on captured and fresh inputs, ranges and specials
// (-inf rows, causal masks, NaN, +inf), and accepted. Correctness only.
// Skipped (visibly) without torch.
#include <doctest/doctest.h>

#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/rules/search/library_build.h"

namespace forge {
using nlohmann::json;

TEST_SUITE_BEGIN("rules::SoftmaxDims");

TEST_CASE("log_softmax and softmax over any dim: the row and columns templates verify") {
  FORGE_SKIP_WITHOUT_TORCH();
  test::TempDir dir;
  json r = test::build_library_script("softmax", dir);
  // Verified targets per op (whether a kernel also ships, and so names its
  // strategy, is timing: not asserted). The row templates apply to the last
  // dim only and `columns` to any other (applies: dim), so a selected and
  // verified dim-0 or dim-1 target is the columns template's.
  std::map<std::string, int> verified;
  for (const auto& t : r["targets"]) {
    const std::string op = t["op"];
    if (op != "_softmax" && op != "_log_softmax") continue;
    CAPTURE(t.dump());
    CHECK(t["selection"] == "selected");
    CHECK(t["verified"].get<int>() == 1);
    verified[op] += t["verified"].get<int>();
  }
  CHECK(verified["_log_softmax"] == 2);  // the last dim (rows) and dim 0 (columns)
  CHECK(verified["_softmax"] == 2);      // dim 1 (columns), float32 and bfloat16
}

TEST_SUITE_END();
}  // namespace forge
