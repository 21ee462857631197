// The strategy library's pooling class on the CPU (issue 32): a script with
// every kind of call the pool family takes (tests/rules/search/pool/model.py)
// is captured and built with one candidate per target; the first instance of
// the `windows` template (its op written in by "$op") is verified against
// stock on the captured and fresh inputs, ranges and specials (faster or not
// is timing, not asserted). Correctness only. Skipped (visibly) without torch.
#include <doctest/doctest.h>

#include <set>

#include <nlohmann/json.hpp>

#include "tests/rules/search/library_build.h"

namespace forge {
using nlohmann::json;

TEST_SUITE_BEGIN("rules::Pool");

TEST_CASE("the pooling template verifies max (with indices) and average pooling in 2D, 3D and 1D") {
  FORGE_SKIP_WITHOUT_TORCH();
  test::TempDir dir;
  json r = test::build_library_script("pool", dir);
  std::multiset<std::string> verified;
  const std::set<std::string> pools = {"max_pool2d_with_indices", "max_pool3d_with_indices", "avg_pool2d",
                                       "avg_pool3d", "max_pool1d"};
  for (const auto& t : r["targets"]) {
    const std::string op = t["op"];
    if (!pools.count(op)) continue;  // the bf16 conversion
    CAPTURE(t.dump());
    CHECK(t["selection"] == "selected");
    CHECK(t["verified"].get<int>() == 1);
    if (t["verified"].get<int>() == 1) verified.insert(op);
  }
  // Padding, ceil_mode, dilation and bf16 (2D max); count_include_pad,
  // divisor_override, the 1D form and a 9 x 9 window on a 20 x 22 plane (2D
  // average); 1D max with dilation, and with one output per 7 inputs.
  CHECK(verified.count("max_pool2d_with_indices") == 4);
  CHECK(verified.count("avg_pool2d") == 4);
  CHECK(verified.count("max_pool1d") == 2);
  for (const std::string op : {"max_pool3d_with_indices", "avg_pool3d"}) CHECK_MESSAGE(verified.count(op) == 1, op);
}

TEST_SUITE_END();
}  // namespace forge
