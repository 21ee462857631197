// The strategy library's scan class on the CPU (issue 32): a script with every
// kind of call the scan family takes (tests/rules/search/scan/model.py) is
// captured and built with one candidate per target; the first instance of the
// `lanes` template (its op written in by "$op") is verified against stock on
// the captured and fresh inputs, ranges and specials (faster or not is timing,
// not asserted). Correctness only. Skipped (visibly) without torch.
#include <doctest/doctest.h>

#include <set>

#include <nlohmann/json.hpp>

#include "tests/rules/search/library_build.h"

namespace forge {
using nlohmann::json;

TEST_SUITE_BEGIN("rules::Scan");

TEST_CASE("the scan template verifies cumsum and cumprod along rows, columns and dim 0, and a bf16 input") {
  FORGE_SKIP_WITHOUT_TORCH();
  test::TempDir dir;
  json r = test::build_library_script("scan", dir);
  std::multiset<std::string> verified;
  for (const auto& t : r["targets"]) {
    const std::string op = t["op"];
    if (op != "cumsum" && op != "cumprod") continue;  // the flips and the bf16 conversion
    CAPTURE(t.dump());
    CHECK(t["selection"] == "selected");
    CHECK(t["verified"].get<int>() == 1);
    if (t["verified"].get<int>() == 1) verified.insert(op);
  }
  // Rows, columns, the bf16 row with its float32 result, the flipped view's copy.
  CHECK(verified.count("cumsum") >= 3);
  CHECK(verified.count("cumprod") == 2);
}

TEST_SUITE_END();
}  // namespace forge
