// The strategy library's pointwise class on the CPU (issue 32): a script with
// every kind of call the pointwise and binary families take
// (tests/rules/search/pointwise/model.py) is captured and built with one
// candidate per target; each target's first instance of the `strided`
// template (its op written in by "$op") is verified against stock on the
// captured and fresh inputs, ranges and specials (verified; whether it is
// faster is timing, not asserted here). Correctness
// only: speed is bench/templates' business. Skipped (visibly) without torch.
#include <doctest/doctest.h>

#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "tests/rules/search/library_build.h"

namespace forge {
using nlohmann::json;

TEST_SUITE_BEGIN("rules::Pointwise");

TEST_CASE("the pointwise template verifies for every op kind: scalars, bf16, strided, broadcast, wrapped numbers") {
  FORGE_SKIP_WITHOUT_TORCH();
  test::TempDir dir;
  json r = test::build_library_script("pointwise", dir);
  std::multiset<std::string> accepted;
  for (const auto& t : r["targets"]) {
    const std::string op = t["op"];
    // The script's final sums are the reduce family's (test_reduce_torch.cpp).
    if (t["selection"] != "selected" || op.rfind("sum", 0) == 0) continue;
    CAPTURE(t.dump());
    CHECK(t["verified"].get<int>() == 1);
    if (t["verified"].get<int>() == 1) accepted.insert(op);
  }
  // 17 calls: 12 unary targets (gelu twice) and 5 binary ones (mul by a float and by an int).
  for (const char* op : {"relu", "gelu", "silu", "tanh", "mish", "softplus", "elu", "hardswish", "leaky_relu", "clamp",
                         "pow.Tensor_Scalar", "add.Tensor", "mul.Tensor", "div.Tensor", "maximum"})
    CHECK_MESSAGE(accepted.count(op) >= 1, op);
  CHECK(accepted.count("gelu") == 2);  // approximate "none" and "tanh"
  CHECK(accepted.count("mul.Tensor") == 2);  // x * 0.5 and x * 3
}

TEST_SUITE_END();
}  // namespace forge
