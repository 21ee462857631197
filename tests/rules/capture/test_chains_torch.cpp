// Chains from a real capture's data flow (issue 33, item 1): `forge capture`
// of tests/rules/capture/chains/model.py, then `forge --json status` lists the
// HF-style RMSNorm's six ops (the module's whole forward, by the module paths
// the capture records) and group_norm -> SiLU as chains, and nothing through
// exp, whose output two ops read. Skipped (visibly) without torch.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "tests/support.h"

namespace forge {
using nlohmann::json;

TEST_SUITE_BEGIN("rules::ChainsTorch");

TEST_CASE("forge status lists the chains of a captured script with their ops") {
  FORGE_SKIP_WITHOUT_TORCH();
  namespace fs = std::filesystem;
  test::TempDir dir;
  fs::copy_file(fs::path(FORGE_TEST_DIR) / "rules" / "capture" / "chains" / "model.py", dir / "model.py");
  test::write_text(dir / "forge.yaml",
                   "models:\n  m: {run: python model.py, env: {OMP_NUM_THREADS: '1'}}\n"
                   "targets: {top: 0, min_share: 0}\n");
  auto cap = test::run_forge("capture", dir.path());
  INFO(cap.err);
  REQUIRE(cap.exit_code == 0);
  auto st = test::run_forge("--json status", dir.path());
  INFO(st.err);
  REQUIRE(st.exit_code == 0);
  json chains = json::parse(st.out)["chains"];
  CAPTURE(chains.dump());
  std::vector<std::vector<std::string>> found;
  const std::vector<std::string> gelu = {"mul.Tensor", "pow.Tensor_Scalar", "mul.Tensor", "add.Tensor",
                                         "mul.Tensor", "tanh",              "add.Tensor", "mul.Tensor"};
  for (const auto& c : chains) {
    found.push_back(c["ops"].get<std::vector<std::string>>());
    if (c["module"].is_string() && c["module"].get<std::string>().ends_with("__main__.NewGELU")) {
      // Both instances' calls (inside Block and outside): one class, one chain.
      CHECK(c["calls"] == 6);
      CHECK(c["whole_forward"] == true);
      // Its muls by 0.5, 0.044715 and sqrt(2 / pi) are entries of their own.
      std::multiset<std::string> ops(c["ops"].begin(), c["ops"].end());
      CHECK(ops == std::multiset<std::string>(gelu.begin(), gelu.end()));
      CHECK(c["ops"].back() == "mul.Tensor");
      CHECK(std::count_if(c["signatures"].begin(), c["signatures"].end(), [](const json& sig) {
              return sig.get<std::string>().find(" numbers(") != std::string::npos;
            }) == 4);  // x * 0.5, * 0.044715, * sqrt(2 / pi), 1.0 +
      continue;
    }
    // The last iteration's d = block(g) - act(g) into the script's checksum:
    // one call of sub -> sum.
    CHECK(c["calls"] == (c["ops"] == json{"sub.Tensor", "sum.dim_IntList"} ? 1 : 3));
    CHECK(c["searched"] == false);
    CHECK(c["time_us"].get<double>() > 0);
  }
  const std::vector<std::string> rms = {"pow.Tensor_Scalar", "mean.dim", "add.Tensor", "rsqrt", "mul.Tensor", "mul.Tensor"};
  const std::vector<std::string> gn_silu = {"native_group_norm", "silu"};
  CHECK(std::find(found.begin(), found.end(), rms) != found.end());
  CHECK(std::find(found.begin(), found.end(), gn_silu) != found.end());
  CHECK(std::count_if(chains.begin(), chains.end(),
                      [](const json& c) { return c["ops"].size() == 8 && c["whole_forward"] == true; }) == 1);
  for (const auto& c : chains) {
    if (c["ops"].get<std::vector<std::string>>() == rms) {
      // Every op of the module's forward: a kernel for it can stand in for RMSNorm.forward.
      CHECK(c["module"] == "__main__.RMSNorm");
      CHECK(c["whole_forward"] == true);
    } else if (c["ops"].get<std::vector<std::string>>() == gn_silu) {
      CHECK(c["module"].is_null());  // group_norm in GroupNorm, silu outside any module
      CHECK(c["whole_forward"] == false);
    }
  }
  for (const auto& ops : found) CHECK(std::find(ops.begin(), ops.end(), "exp") == ops.end());
  // The text form says the same.
  auto text = test::run_forge("status", dir.path());
  CHECK(text.out.find("native_group_norm -> silu") != std::string::npos);
}

TEST_SUITE_END();
}  // namespace forge
