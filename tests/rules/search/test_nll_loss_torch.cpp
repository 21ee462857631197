// The strategy library's nll_loss class on the CPU (issue 32): cross entropy's
// second op (tests/rules/search/nll_loss/model.py) is captured and built with
// one candidate per target; the `gather` template is verified against stock
// on the captured and fresh inputs, its class indices drawn from the range
// the capture recorded (faster or not is timing, not asserted). Correctness
// only. Skipped (visibly) without torch.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "tests/rules/search/library_build.h"

namespace forge {
using nlohmann::json;

TEST_SUITE_BEGIN("rules::NllLoss");

TEST_CASE("the nll_loss template verifies cross entropy's mean and sum, an ignored class and one sample") {
  FORGE_SKIP_WITHOUT_TORCH();
  test::TempDir dir;
  json r = test::build_library_script("nll_loss", dir);
  int verified = 0;
  for (const auto& t : r["targets"]) {
    if (t["op"] != "nll_loss_forward") continue;
    CAPTURE(t.dump());
    CHECK(t["selection"] == "selected");
    CHECK(t["verified"].get<int>() == 1);
    verified += t["verified"].get<int>();
  }
  CHECK(verified == 3);
}

TEST_SUITE_END();
}  // namespace forge
