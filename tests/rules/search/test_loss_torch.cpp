// The strategy library's loss class on the CPU (issue 32): a script with every
// kind of call the loss family takes (tests/rules/search/loss/model.py) is
// captured and built with one candidate per target; the first instance of the
// `fused` template (its op written in by "$op") is verified against stock on
// the captured and fresh inputs, ranges and specials (faster or not is timing,
// not asserted). Correctness only. Skipped (visibly) without torch.
#include <doctest/doctest.h>

#include <set>

#include <nlohmann/json.hpp>

#include "tests/rules/search/library_build.h"

namespace forge {
using nlohmann::json;

TEST_SUITE_BEGIN("rules::Loss");

TEST_CASE("the loss template verifies mse, smooth_l1 and huber losses, reduced or not") {
  FORGE_SKIP_WITHOUT_TORCH();
  test::TempDir dir;
  json r = test::build_library_script("loss", dir);
  std::multiset<std::string> verified;
  for (const auto& t : r["targets"]) {
    const std::string op = t["op"];
    if (op != "mse_loss" && op != "smooth_l1_loss" && op != "huber_loss") continue;  // the bf16 conversions
    CAPTURE(t.dump());
    CHECK(t["selection"] == "selected");
    CHECK(t["verified"].get<int>() == 1);
    if (t["verified"].get<int>() == 1) verified.insert(op);
  }
  // Mean, none and the bf16 sum; mean and sum at two betas; mean and none.
  CHECK(verified.count("mse_loss") == 3);
  CHECK(verified.count("smooth_l1_loss") == 2);
  CHECK(verified.count("huber_loss") == 2);
}

TEST_SUITE_END();
}  // namespace forge
