// The signature-family rule (runtime/common/signature_family.h), directly:
// parsing and writing its keys, the guard's per-argument tests as
// libforge.so's guard (runtime/package/guard.cpp, which the torch.compile
// routing calls too) applies them, and every shipped family.yaml passing the
// same parse the worker and the guard use. The bound (vary_max)
// is tested with the packager in tests/rules/package/test_vary_bound.cpp.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "rules/evaluate/family.h"
#include "runtime/common/signature_family.h"

namespace forge {
using nlohmann::json;
using namespace family;

TEST_SUITE_BEGIN("runtime::SignatureFamily");

namespace {

// group_norm's: the batch (input dim 0) varies and N (arg 3) follows it.
SignatureFamily group_norm() {
  return parse(json::parse(R"({"vary": [{"arg": 0, "dim": 0}], "contiguous": true,
                               "vary_outputs": [0, 1, 2], "pins": [{"arg": 3, "vary": 0}]})"));
}

}  // namespace

TEST_CASE("parse reads every key; absent keys and a non-object take the defaults") {
  SignatureFamily f = group_norm();
  REQUIRE(f.vary.size() == 1);
  CHECK(f.vary[0].arg == 0);
  CHECK(f.vary[0].dim == 0);
  REQUIRE(f.pins.size() == 1);
  CHECK(f.pins[0].arg == 3);
  CHECK(f.pins[0].vary == 0);
  CHECK(f.contiguous);
  CHECK(f.vary_outputs == std::vector<int>{0, 1, 2});

  for (const json& j : {json::object(), json(nullptr), json::array()}) {
    SignatureFamily d = parse(j);
    CHECK(d.vary.empty());
    CHECK(d.pins.empty());
    CHECK(d.contiguous);
    CHECK(d.vary_outputs.empty());
  }
  CHECK_FALSE(parse(json{{"contiguous", false}}).contiguous);
  // The worker's ordered JSON reads the same.
  CHECK(parse(nlohmann::ordered_json::parse(R"({"vary": [{"dim": 2, "arg": 1}]})")).vary[0].dim == 2);
}

TEST_CASE("a malformed key throws; problem() names what parses but cannot hold") {
  CHECK_THROWS_AS(parse(json::parse(R"({"vary": [{"arg": 0}]})")), json::exception);
  CHECK_THROWS_AS(parse(json::parse(R"({"pins": [{"arg": "N", "vary": 0}]})")), json::exception);
  CHECK_THROWS_AS(parse(json::parse(R"({"contiguous": "yes"})")), json::exception);

  CHECK(problem(group_norm()) == "");
  SignatureFamily f = group_norm();
  f.pins[0].vary = 1;
  CHECK(problem(f) == "pins entry {arg: 3, vary: 1} names no vary entry (there are 1)");
  f = group_norm();
  f.vary[0].arg = -1;
  CHECK(problem(f) == "vary entry {arg: -1} names no argument");
  f = group_norm();
  f.vary_outputs = {-2};
  CHECK(problem(f) == "vary_outputs entry -2 names no output");
}

TEST_CASE("to_json writes what parse reads, defaults included") {
  const json j = to_json<json>(group_norm());
  CHECK(j == json::parse(R"({"vary": [{"arg": 0, "dim": 0}], "pins": [{"arg": 3, "vary": 0}],
                             "contiguous": true, "vary_outputs": [0, 1, 2]})"));
  const SignatureFamily back = parse(j);
  CHECK(back.pins[0].arg == 3);
  CHECK(to_json<json>(SignatureFamily{}) ==
        json::parse(R"({"vary": [], "pins": [], "contiguous": true, "vary_outputs": []})"));
}

TEST_CASE("shape: a varied dim records its extent, every other dim must equal the captured one") {
  const SignatureFamily f = group_norm();
  const std::vector<int64_t> captured = {8, 32, 16, 16};
  std::vector<int64_t> extent(f.vary.size(), -1);
  CHECK(vary_index(f, 0, 0) == 0);
  CHECK(vary_index(f, 0, 1) == -1);
  CHECK(vary_index(f, 1, 0) == -1);

  CHECK(shape_matches(f, 0, captured, std::vector<int64_t>{3, 32, 16, 16}, extent));
  CHECK(extent[0] == 3);
  CHECK_FALSE(shape_matches(f, 0, captured, std::vector<int64_t>{3, 16, 16, 16}, extent));  // channels
  CHECK_FALSE(shape_matches(f, 0, captured, std::vector<int64_t>{3, 32, 256}, extent));     // rank
  // Another tensor argument (the weight) does not vary at all.
  CHECK(shape_matches(f, 1, std::vector<int64_t>{32}, std::vector<int64_t>{32}, extent));
  CHECK_FALSE(shape_matches(f, 1, std::vector<int64_t>{32}, std::vector<int64_t>{33}, extent));
  // A dim counted from the end never varies in the guard.
  const SignatureFamily last = parse(json::parse(R"({"vary": [{"arg": 0, "dim": -1}]})"));
  std::vector<int64_t> e1(1, -1);
  CHECK_FALSE(shape_matches(last, 0, std::vector<int64_t>{4, 8}, std::vector<int64_t>{4, 9}, e1));
}

TEST_CASE("layout: a contiguous family takes any contiguous call, another the captured strides at offset 0") {
  const SignatureFamily contiguous = group_norm();
  const std::vector<int64_t> captured = {64, 1}, other = {1, 4};
  CHECK(layout_matches(contiguous, true, other, captured, 5));  // strides and offset free
  CHECK_FALSE(layout_matches(contiguous, false, captured, captured, 0));

  const SignatureFamily strided = parse(json{{"contiguous", false}});
  CHECK(layout_matches(strided, false, captured, captured, 0));
  CHECK(layout_matches(strided, true, captured, captured, 0));
  CHECK_FALSE(layout_matches(strided, true, other, captured, 0));
  CHECK_FALSE(layout_matches(strided, false, captured, captured, 1));
}

TEST_CASE("ints: a pinned one equals its varied extent, any other its captured value") {
  const SignatureFamily f = group_norm();
  std::vector<int64_t> extent = {3};
  CHECK(int_matches(f, 3, 3, /*captured=*/8, extent));   // N follows the batch
  CHECK_FALSE(int_matches(f, 3, 8, 8, extent));          // the captured N, another batch
  CHECK(int_matches(f, 4, 32, 32, extent));               // C: not pinned
  CHECK_FALSE(int_matches(f, 4, 16, 32, extent));
  extent = {-1};                                           // the batch not seen
  CHECK_FALSE(int_matches(f, 3, 8, 8, extent));
}

TEST_CASE("the bound: every extent within 1..vary_max, none below 1") {
  const std::vector<VaryBound> bounds = {{1, 64}};
  CHECK(within_verified(bounds, {1}));
  CHECK(within_verified(bounds, {64}));
  CHECK_FALSE(within_verified(bounds, {65}));
  CHECK_FALSE(within_verified(bounds, {0}));
  CHECK_FALSE(within_verified(bounds, {-1}));
  CHECK_FALSE(within_verified(bounds, {}));
  CHECK(within_verified({}, {}));
}

TEST_CASE("every shipped family's signature_family parses without a problem") {
  for (const auto& fam : load_families(default_targets_dir())) {
    CAPTURE(fam.name);
    const SignatureFamily f = parse(fam.spec.value("signature_family", json::object()));
    CHECK(problem(f) == "");
    // Every family varies dim 0 of its input, but binary (its two inputs'
    // shapes are tied by broadcasting), reduce, loss and nll_loss (whether
    // dim 0 is reduced decides how the outputs follow it): their signatures
    // are as captured.
    const bool as_captured = fam.name == "binary" || fam.name == "reduce" || fam.name == "loss" || fam.name == "nll_loss";
    CHECK(f.vary.size() == (as_captured ? 0u : 1u));
  }
}

TEST_SUITE_END();

}  // namespace forge
