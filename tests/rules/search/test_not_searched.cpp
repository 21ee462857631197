// Why the search leaves a selected target alone (rules/search/not_searched.h):
// no family, no proposer, the nearest strategy and what it needs. No torch.
#include <doctest/doctest.h>

#include "rules/evaluate/family.h"
#include "rules/search/not_searched.h"
#include "rules/search/strategies.h"
#include "tests/support.h"

namespace forge {
using nlohmann::json;

TEST_SUITE_BEGIN("rules::NotSearched");

namespace {

// _softmax over the last dim of f32[rows, row].
Target softmax(int rows, int row, std::vector<int> strides = {}) {
  if (strides.empty()) strides = {row, 1};
  Target t;
  t.op = "_softmax";
  const json in{{"type", "Tensor"}, {"dtype", "float32"}, {"sizes", {rows, row}}, {"strides", strides}};
  t.args = json::array({in, {{"type", "int"}, {"value", -1}}, {{"type", "bool"}, {"value", false}}});
  t.outputs = json::array({{{"type", "Tensor"}, {"dtype", "float32"}, {"sizes", {rows, row}}, {"strides", {row, 1}}}});
  return t;
}

// A family "fam" with three strategies: small rows and big rows on the CPU, one on CUDA.
Family family(const test::TempDir& dir) {
  test::write_text(dir / "fam" / "family.yaml", "name: fam\nops: [_softmax]\ntolerance: {float32: {atol: 0, rtol: 0}}\n");
  test::write_text(dir / "fam" / "k.cpp", "int forge_kernel();\n");
  test::write_text(dir / "fam" / "strategies.yaml",
                   "strategies:\n"
                   "  - {name: small, backend: cpu, source: k.cpp, applies: {dtype: [float32], layout: contiguous, "
                   "dim: last, row: [1, 4096]}}\n"
                   "  - {name: big, backend: cpu, source: k.cpp, applies: {dtype: [float32, float16], layout: contiguous, "
                   "dim: last, row: [65536, 1048576]}}\n"
                   "  - {name: gpu, backend: cuda, source: k.cpp, applies: {dtype: [float32]}}\n");
  return load_family(dir / "fam" / "family.yaml");
}

}  // namespace

TEST_CASE("no family: the ABI's reason, as family_of gave it") {
  Target t = softmax(4, 8);
  CHECK(no_family(t, "the candidate ABI cannot express the call: argument 1 (dim) ...") == 0);
  CHECK(t.selection == Selection::Abi);
  CHECK(t.why == "the candidate ABI cannot express the call: argument 1 (dim) ...");
}

TEST_CASE("no proposer for a derived family: the library has none for the op") {
  Target t = softmax(4, 8);
  t.op = "silu";
  t.args = nlohmann::json::array({t.args[0]});
  const Family derived = derive_family(t);
  ProposerSpec strategies_only;
  CHECK(no_proposer(t, derived, strategies_only, "cpu") == 0);
  CHECK(t.selection == Selection::NoProposer);
  CHECK(t.why.find("the strategy library has no family for silu") == 0);
}

TEST_CASE("unmet conditions say what the strategy needs and what the signature has") {
  test::TempDir dir;
  const auto all = load_strategies(family(dir));
  REQUIRE(all.size() == 3);
  CHECK(unmet_conditions(all[0], softmax(4, 8), "cpu").empty());
  CHECK(strategy_applies(all[0], softmax(4, 8), "cpu"));
  CHECK(unmet_conditions(all[0], softmax(4, 46080), "cpu") ==
        std::vector<std::string>{"row in [1, 4096] (here 46080)"});
  CHECK(unmet_conditions(all[0], softmax(4, 8, {1, 4}), "cpu") ==
        std::vector<std::string>{"layout [contiguous] (here strides [1,4] for sizes [4,8])"});
  CHECK(unmet_conditions(all[2], softmax(4, 8), "cpu") == std::vector<std::string>{"backend cuda (here cpu)"});
}

TEST_CASE("the nearest strategy: fewest unmet conditions, then the closest range") {
  test::TempDir dir;
  const auto all = load_strategies(family(dir));
  // Both miss on row alone: log2(46080/4096) = 3.5 doublings past small, log2(65536/46080) = 0.5 short of big.
  auto n = nearest_strategy(all, softmax(4, 46080), "cpu");
  REQUIRE(n);
  CHECK(n->strategy->name == "big");
  CHECK(n->unmet == std::vector<std::string>{"row in [65536, 1048576] (here 46080)"});
  n = nearest_strategy(all, softmax(4, 5000), "cpu");
  REQUIRE(n);
  CHECK(n->strategy->name == "small");
  CHECK_FALSE(nearest_strategy({all[0], all[1]}, softmax(4, 8), "cuda"));
}

TEST_CASE("no proposer: the nearest strategy and its range, or why there is none") {
  test::TempDir dir;
  const Family fam = family(dir);
  ProposerSpec want;
  Target t = softmax(4, 46080);
  CHECK(no_proposer(t, fam, want, "cpu") == 0);
  CHECK(t.selection == Selection::NoProposer);
  CHECK(t.why ==
        "no strategy applies at this shape; nearest: big in targets/fam/strategies.yaml, which needs "
        "row in [65536, 1048576] (here 46080); no model proposer configured (proposer.llm)");
  test::write_text(dir / "fam" / "strategies.yaml",
                   "strategies:\n  - {name: gpu, backend: cuda, source: k.cpp, applies: {dtype: [float32]}}\n");
  no_proposer(t, fam, want, "cpu");
  CHECK(t.why == "targets/fam/strategies.yaml has no strategy for the cpu backend; no model proposer configured "
                 "(proposer.llm)");
  want.strategies = false;
  no_proposer(t, fam, want, "cpu");
  CHECK(t.why == "forge.yaml's proposer turns the strategy library off and configures no model (proposer.llm)");
}

TEST_SUITE_END();
}  // namespace forge
