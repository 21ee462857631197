// A chain as a target (issue 33, item 2): the chains script
// (tests/rules/capture/chains/model.py) has an HF-style RMSNorm and a
// group_norm -> SiLU; each chain gets a target id, and `forge try` verifies a
// fused group_norm + SiLU kernel against the stock chain run op by op (the
// worker's forge_chain op) and rejects one that leaves the SiLU out.
// Skipped (visibly) where torch is not importable.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/support.h"

namespace forge {
namespace fs = std::filesystem;
using nlohmann::json;

TEST_SUITE_BEGIN("rules::ChainTarget");

TEST_CASE("a chain's target: a fused kernel verified against the stock chain, a wrong one rejected") {
  FORGE_SKIP_WITHOUT_TORCH();
  const fs::path tests = fs::path(FORGE_TEST_DIR) / "rules";
  test::TempDir dir;
  fs::copy_file(tests / "capture" / "chains" / "model.py", dir / "model.py");
  // The wrong kernel is the honest one with its SiLU left out.
  const std::string honest = test::read_text(tests / "evaluate" / "chain" / "gn_silu.cc");
  const std::string silu = "v / (1.0f + std::exp(-v));";
  REQUIRE(honest.find(silu) != std::string::npos);
  std::string no_silu = honest;
  no_silu.replace(no_silu.find(silu), silu.size(), "v;");
  test::write_text(dir / "gn_silu.cpp", honest);
  test::write_text(dir / "gn_no_silu.cpp", no_silu);
  test::write_text(dir / "forge.yaml",
                   "models:\n  m: {run: python model.py, env: {OMP_NUM_THREADS: '1'}}\n"
                   "device: {backend: cpu}\n"
                   "budget: {iterations: 0}\n");  // capture and selection; forge try evaluates
  auto build = test::run_forge("--json build", dir.path());
  INFO(build.err);
  REQUIRE(build.exit_code == 0);
  json r = json::parse(build.out);
  std::string gn_silu, rms;
  for (const auto& c : r["chains"]) {
    const json ops = c["ops"];
    if (ops == json{"native_group_norm", "silu"}) gn_silu = c.value("id", "");
    if (ops.size() == 6 && ops[0] == "pow.Tensor_Scalar") rms = c.value("id", "");
  }
  REQUIRE_FALSE(gn_silu.empty());
  CHECK(gn_silu.rfind("m/chain/", 0) == 0);
  CHECK_FALSE(rms.empty());  // x read twice (pow, mul) and the weight: three inputs

  auto attempt = [&](const std::string& file) { return test::forge_try(dir.path(), gn_silu, file); };
  json ok = attempt("gn_silu.cpp");
  CAPTURE(ok.dump());
  CHECK(ok["verdict"] == "accepted");
  CHECK(ok["verify"]["cases"].get<int>() >= 5);  // the captured samples, fresh ranges, specials
  CHECK(ok["signature"].get<std::string>().find("native_group_norm") != std::string::npos);
  json wrong = attempt("gn_no_silu.cpp");
  CAPTURE(wrong.dump());
  CHECK(wrong["verdict"] == "rejected");
  CHECK(wrong["reason"] == "wrong_result");
}

TEST_SUITE_END();
}  // namespace forge
