// A LayerNorm over a transposed view through `forge build` (issue 30): the
// captured strides are part of the signature, the contiguous templates do not
// apply, and the strategy library's `strided` template is searched and a
// kernel verified by the worker on the strided call. Skipped (visibly) where
// torch is not importable.
#include <doctest/doctest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "tests/support.h"

namespace forge {
namespace fs = std::filesystem;
using nlohmann::json;

TEST_SUITE_BEGIN("rules::SearchStrided");

TEST_CASE("a layer_norm over a transposed view is searched with the strided template and a kernel verified") {
  FORGE_SKIP_WITHOUT_TORCH();
  test::TempDir dir;
  fs::copy_file(fs::path(FORGE_TEST_DIR) / "rules" / "search" / "strided" / "model.py", dir / "model.py");
  test::write_text(dir / "forge.yaml",
                   "models:\n  m: {run: python model.py, env: {OMP_NUM_THREADS: '1'}}\n"
                   "targets: {ops: [native_layer_norm], top: 0, min_share: 0}\n"
                   "budget: {iterations: 2}\n");
  auto build = test::run_forge("--json build", dir.path());
  INFO(build.err);
  REQUIRE(build.exit_code == 0);
  json r = json::parse(build.out);
  const json* ln = nullptr;
  for (const auto& t : r["targets"])
    if (t["op"] == "native_layer_norm") ln = &t;
  REQUIRE(ln);
  const json& t = *ln;
  CAPTURE(t.dump());
  CHECK(t["selection"] == "selected");
  CHECK(t["iterations"] == 2);
  // Only `strided` applies, and every instance verifies on the strided call
  // (ok: faster than stock; not_faster: verified, not faster).
  CHECK(t["verified"].get<int>() >= 1);
  for (const auto& [kind, n] : t["outcomes"].items()) CHECK((kind == "ok" || kind == "not_faster"));
  if (t["accepted"].get<int>() > 0) CHECK(t["best_strategy"].get<std::string>().find("strided ") == 0);
}

TEST_SUITE_END();
}  // namespace forge
