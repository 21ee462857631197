// A call too large to verify on the device: the worker refuses it before
// allocating anything, saying so ("refused": "memory"), and forge reads that
// as "too_large", which leaves the target out of the search instead of
// failing the build (rules/evaluate/judge.h, TooLargeToVerify). Here on the
// CPU backend: a relu on a 1 TiB tensor. Skipped (visibly) where torch is not
// importable.
#include <doctest/doctest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "rules/evaluate/executor.h"
#include "rules/evaluate/family.h"
#include "tests/adversarial/direct_worker.h"
#include "tests/support.h"

namespace forge {
namespace fs = std::filesystem;
using nlohmann::json;

TEST_SUITE_BEGIN("rules::TooLarge");

TEST_CASE("a call too large to verify is refused for memory, and forge reads it as too_large") {
  FORGE_SKIP_WITHOUT_TORCH();
  const fs::path repo = fs::path(FORGE_TEST_DIR).parent_path();
  test::TempDir dir;
  // `forge try` on a captured relu builds the worker the request goes to.
  test::write_text(dir / "m.py", "import torch\nprint(float(torch.relu(torch.randn(64)).sum()))\n");
  test::write_text(dir / "forge.yaml", "models:\n  m: {run: python3 m.py}\ntargets: {ops: [relu], min_share: 0}\n"
                                       "device: {backend: cpu}\n");
  auto capture = test::run_forge("--json capture", dir.path());
  REQUIRE(capture.exit_code == 0);
  const json targets = json::parse(capture.out)["targets"];
  REQUIRE(targets.size() == 1);
  test::write_text(dir / "relu.cpp", test::library_kernel("pointwise", "strided"));
  auto tried = test::run_forge("try " + targets[0]["id"].get<std::string>() + " relu.cpp", dir.path());
  INFO(tried.err);
  const fs::path worker = test::newest_worker();
  REQUIRE(!worker.empty());
  const json family = load_family(repo / "targets" / "pointwise" / "family.yaml").spec;
  const json huge = {{"type", "Tensor"}, {"dtype", "float32"}, {"sizes", {1 << 20, 1 << 18}},
                     {"strides", {1 << 18, 1}}, {"device", "cpu"}, {"name", "self"}};
  const json request = test::evaluate_request("huge", "relu", json::array({huge}), family, dir / "never_loaded.so");
  auto replies = test::evaluate_directly(worker, {request}, dir.path(), "--backend cpu");
  REQUIRE(replies.count("huge") == 1);
  const json& r = replies["huge"];
  INFO(r.dump());
  CHECK(r.value("refused", "") == "memory");
  CHECK(r.value("error", "").find("not enough memory to evaluate") != std::string::npos);
  const EvalResult res = eval_result_from_reply(r);
  CHECK(res.verdict == "error");
  CHECK(res.reason == "too_large");
}

TEST_SUITE_END();
}  // namespace forge
