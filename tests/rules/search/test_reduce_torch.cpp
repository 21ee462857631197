// The strategy library's reduction class on the CPU (issue 32): a script with
// every kind of call the reduce family takes, two runs of reduced dims among
// them (tests/rules/search/reduce/model.py) is captured and built with one candidate per target; the first
// instance of the `lanes` template (its op written in by "$op") is verified
// against stock on the captured and fresh inputs, ranges and specials, and
// verified for each (faster or not is timing, not asserted). Correctness only. Skipped (visibly) without torch.
#include <doctest/doctest.h>

#include <set>

#include <nlohmann/json.hpp>

#include "tests/rules/search/library_build.h"

namespace forge {
using nlohmann::json;

TEST_SUITE_BEGIN("rules::Reduce");

TEST_CASE("the reduce template verifies rows, columns, every dim, a slice, indices, max.dim and norms") {
  FORGE_SKIP_WITHOUT_TORCH();
  test::TempDir dir;
  json r = test::build_library_script("reduce", dir);
  std::multiset<std::string> accepted;
  for (const auto& t : r["targets"]) {
    const std::string op = t["op"];
    if (op == "copy_") continue;  // the dtype conversions around argmin's bf16 input
    CAPTURE(t.dump());
    CHECK(t["selection"] == "selected");
    CHECK(t["verified"].get<int>() == 1);
    if (t["verified"].get<int>() == 1) accepted.insert(op);
  }
  for (const char* op : {"argmax", "argmin", "max.dim", "prod.dim_int"}) CHECK_MESSAGE(accepted.count(op) == 1, op);
  // One run of dims, and dims 0 and 2 of [16, 64, 48] ([R1, outer, R]).
  CHECK(accepted.count("mean.dim") == 2);
  CHECK(accepted.count("amax") == 2);
  // 2-norms of rows, of all and over dims 0 and 2, a 1-norm of columns.
  CHECK(accepted.count("linalg_vector_norm") == 4);
  // Rows, columns, the first dim, every dim, and the full sums of the final print.
  CHECK(accepted.count("sum.dim_IntList") >= 4);
}

TEST_SUITE_END();
}  // namespace forge
