// Batch norm chains of a ResNet-like block (issue 33: batch_norm -> ReLU,
// add -> activation): `forge build` on tests/rules/package/chain_batch_norm/
// model.py tells apart, call by call in the capture's trace, the two chains
// its batch norms (one entry: one signature) start — bn -> relu_ and
// bn -> add_ -> relu_, ReLU and the residual add in place — fuses each in the
// library's pointwise template (the batch norm in eval mode reading its
// per-channel parameters), verifies and packages them; a compiled graph of
// the block calls the first chain's op where Inductor's graph spells it
// _native_batch_norm_legit_no_training -> relu, with outputs equal to
// eager's. Skipped (visibly) without torch.
#include <doctest/doctest.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support.h"

namespace forge {
namespace fs = std::filesystem;
using nlohmann::json;

TEST_SUITE_BEGIN("rules::ChainBatchNorm");

TEST_CASE("a ResNet block's batch norm chains are found per call, fused, verified and called in compiled graphs") {
  FORGE_SKIP_WITHOUT_TORCH();
  test::TempDir dir;
  for (const char* f : {"model.py", "compiled.py"})
    fs::copy_file(fs::path(FORGE_TEST_DIR) / "rules" / "package" / "chain_batch_norm" / f, dir / f);
  // One end-to-end run: the package this test reads is not judged by speed.
  test::write_text(dir / "forge.yaml",
                   "models:\n  m: {run: python model.py, check_runs: 1, env: {OMP_NUM_THREADS: '1'}}\n"
                   "device: {backend: cpu}\n"
                   "budget: {iterations: 1}\n"
                   "targets: {top: 1, chains: 2}\n");
  auto build = test::run_forge("--json build", dir.path());
  INFO(build.err);
  REQUIRE(build.exit_code == 0);
  const json report = json::parse(build.out);
  CAPTURE(report["chains"].dump());
  std::map<std::vector<std::string>, json> chains;
  for (const auto& c : report["chains"]) chains[c["ops"].get<std::vector<std::string>>()] = c;
  const std::vector<std::string> bn_relu{"native_batch_norm", "relu_"}, bn_add_relu{"native_batch_norm", "add_.Tensor", "relu_"};
  REQUIRE(chains.count(bn_relu) == 1);
  REQUIRE(chains.count(bn_add_relu) == 1);
  // The script's three forwards; the last one's second chain goes on into
  // the script's checksum, which makes no chain of its own.
  CHECK(chains[bn_relu]["calls"] == 3);
  CHECK(chains[bn_add_relu]["calls"] == 3);
  CHECK(report["chains"].size() == 2);
  for (const auto* ops : {&bn_relu, &bn_add_relu}) {
    const json& c = chains[*ops];
    CHECK(c["searched"] == true);
    CHECK(c["search"]["verified"] == 1);
    CHECK(c["search"]["best_strategy"].get<std::string>().rfind("fused_pointwise", 0) == 0);
  }
  const std::string relu_target = chains[bn_relu]["id"].get<std::string>();
  const std::string add_target = chains[bn_add_relu]["id"].get<std::string>();

  // Under torch.compile (policy forge: this machine's measured choice may go
  // either way) both chains are their forged ops, the second one's input
  // (a convolution's output) in the layout the graph traced; outputs match eager.
  auto compiled = test::run_forge(
      "run --json-report compiled.json -- env OMP_NUM_THREADS=1 FORGE_COMPILE_POLICY=forge python compiled.py",
      dir.path());
  INFO(compiled.err);
  REQUIRE(compiled.exit_code == 0);
  CHECK(compiled.out == "match True\n");
  std::map<std::string, long> forged;
  const json calls = json::parse(test::read_text(dir / "compiled.json"));
  for (const auto& e : calls["entries"]) forged[e.value("target", "")] = e.value("forged", 0L);
  CHECK(forged[relu_target] == 3);
  CHECK(forged[add_target] == 3);
}

TEST_SUITE_END();
}  // namespace forge
