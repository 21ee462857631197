// The strategy library's training-mode batch_norm on the CPU (issue 32): a
// script with BatchNorm2d and BatchNorm1d in training mode and an
// InstanceNorm2d (tests/rules/search/batch_norm_train/model.py) is
// captured and built with one candidate per target; the first instance of
// `train_planes` is verified against stock on the captured and fresh inputs,
// the running statistics the call updates included (outputs 3 and 4 where
// the call has them). Correctness only. Skipped (visibly) without torch.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "tests/rules/search/library_build.h"

namespace forge {
using nlohmann::json;

TEST_SUITE_BEGIN("rules::BatchNormTrain");

TEST_CASE("train_planes verifies batch norm in training mode and instance norm") {
  FORGE_SKIP_WITHOUT_TORCH();
  test::TempDir dir;
  json r = test::build_library_script("batch_norm_train", dir);
  int verified = 0;
  for (const auto& t : r["targets"]) {
    if (t["op"] != "native_batch_norm") continue;
    CAPTURE(t.dump());
    CHECK(t["selection"] == "selected");
    CHECK(t["verified"].get<int>() == 1);
    verified += t["verified"].get<int>();
  }
  CHECK(verified == 3);  // BatchNorm2d, BatchNorm1d, InstanceNorm2d
}

TEST_SUITE_END();
}  // namespace forge
