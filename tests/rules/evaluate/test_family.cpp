// Op families (targets/<family>/family.yaml): the shipped files load, YAML
// becomes typed JSON, ops resolve to their family, and every malformed file is
// an error that names the file and, where known, the line.
#include <doctest/doctest.h>

#include "rules/evaluate/family.h"
#include "tests/support.h"
#include "util/error.h"
#include "util/hash.h"

namespace forge {
namespace fs = std::filesystem;
using nlohmann::json;

TEST_SUITE_BEGIN("rules::Family");

namespace {

const char* kGood =
    "name: pool\n"
    "ops: [mean.dim, _adaptive_avg_pool2d]\n"
    "verify:\n"
    "  edge_sizes: [1, 3]\n"
    "  ranges: [[-3, 3.5]]\n"
    "  seeds: 2\n"
    "  specials: [neg_inf_row]\n"
    "tolerance:\n"
    "  float32: {atol: 1.0e-6, rtol: 1e-5}\n"
    "cost: {reads: [0], writes: [0], note: 'quoted 12', flag: true, nothing: ~}\n";

// Writes `text` as <root>/<folder>/family.yaml and returns its path.
fs::path put(const test::TempDir& dir, const std::string& folder, const std::string& text) {
  fs::path p = dir / folder / "family.yaml";
  test::write_text(p, text);
  return p;
}

std::string error_of(const fs::path& file) {
  try {
    load_family(file);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("the shipped softmax family loads and covers _softmax") {
  auto families = load_families(default_targets_dir());
  auto f = find_family(families, "_softmax");
  REQUIRE(f.has_value());
  CHECK(f->name == "softmax");
  CHECK(f->spec["tolerance"]["float32"]["atol"].get<double>() == doctest::Approx(1e-6));
  CHECK(f->spec["verify"]["ranges"][1] == json::array({-100, 100}));
  CHECK(f->digest == sha256_hex(test::read_text(f->path)));
  CHECK_FALSE(find_family(families, "no_such_op").has_value());
}

TEST_CASE("YAML scalars become typed JSON; quoted ones stay strings") {
  test::TempDir dir;
  Family f = load_family(put(dir, "pool", kGood));
  CHECK(f.ops == std::vector<std::string>{"mean.dim", "_adaptive_avg_pool2d"});
  const json& s = f.spec;
  CHECK(s["verify"]["edge_sizes"] == json::array({1, 3}));
  CHECK(s["verify"]["edge_sizes"][0].is_number_integer());
  CHECK(s["verify"]["ranges"][0][1].get<double>() == 3.5);
  CHECK(s["tolerance"]["float32"]["rtol"].get<double>() == doctest::Approx(1e-5));
  CHECK(s["cost"]["note"] == "quoted 12");
  CHECK(s["cost"]["flag"] == true);
  CHECK(s["cost"]["nothing"].is_null());
  CHECK(s["verify"]["specials"] == json::array({"neg_inf_row"}));
}

TEST_CASE("ops resolve exactly: an overload is its own op") {
  test::TempDir dir;
  put(dir, "pool", kGood);
  put(dir, "norm",
      "name: norm\nops: [native_layer_norm]\ntolerance: {float32: {atol: 0, rtol: 0}}\n");
  auto families = load_families(dir.path());
  REQUIRE(families.size() == 2);
  CHECK(families[0].name == "norm");  // sorted
  CHECK(find_family(families, "mean.dim")->name == "pool");
  CHECK(find_family(families, "native_layer_norm")->name == "norm");
  // Another overload has another schema (an out= tensor, tensor bounds for
  // clamp.Tensor): not the listed op's family.
  CHECK_FALSE(find_family(families, "native_layer_norm.out").has_value());
  CHECK_FALSE(find_family(families, "mean").has_value());  // "mean.dim" does not cover all of mean
}

TEST_CASE("two families claiming one op is an error naming both files") {
  test::TempDir dir;
  put(dir, "a", "name: a\nops: [_softmax]\ntolerance: {float32: {atol: 0, rtol: 0}}\n");
  put(dir, "b", "name: b\nops: [_softmax]\ntolerance: {float32: {atol: 0, rtol: 0}}\n");
  try {
    load_families(dir.path());
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) == (dir / "b" / "family.yaml").string() +
                                       ": op '_softmax' is already covered by " +
                                       (dir / "a" / "family.yaml").string());
  }
}

TEST_CASE("malformed family files name the file and the place") {
  test::TempDir dir;
  const std::string tol = "tolerance: {float32: {atol: 0, rtol: 0}}\n";
  auto expect = [&](const std::string& folder, const std::string& text, const std::string& msg) {
    fs::path p = put(dir, folder, text);
    CHECK(error_of(p) == p.string() + msg);
  };
  expect("s1", "name: s1\nops: [a\n", ":3:1: end of sequence flow not found");
  expect("s2", "- just a list\n",
         ": a family file is a mapping (name, ops, verify, tolerance, cost)");
  expect("s3", "ops: [x]\n" + tol, ": missing 'name' (the family's name, e.g. softmax)");
  expect("s4", "name: other\nops: [x]\n" + tol, ":1:7: name 'other' differs from its folder 's4'");
  expect("s5", "name: s5\n" + tol,
         ": missing 'ops' (the backend ops this family covers, e.g. [_softmax])");
  expect("s6", "name: s6\nops: []\n" + tol,
         ":2:6: 'ops' must be a non-empty list of backend op names");
  expect("s7", "name: s7\nops: [x]\n", ": missing 'tolerance' (per dtype: {atol, rtol})");
  expect("s8", "name: s8\nops: [x]\ntolerance: {float33: {atol: 0, rtol: 0}}\n",
         ":3:13: unknown dtype 'float33' in 'tolerance'");
  expect("s9", "name: s9\nops: [x]\ntolerance: {float32: {atol: 0}}\n",
         ":3:22: tolerance.float32 needs 'rtol'");
  expect("s10", "name: s10\nops: [x]\ntolerance: {float32: {atol: -1, rtol: 0}}\n",
         ":3:29: tolerance.float32.atol must be a non-negative number");
  expect("s11", "name: s11\nops: [x]\n" + tol + "verify: {edge_sizes: [1, 0]}\n",
         ":4:26: verify.edge_sizes entries must be positive integers");
  expect("s12", "name: s12\nops: [x]\n" + tol + "verify: {ranges: [[3, -3]]}\n",
         ":4:19: verify.ranges entries must be [low, high] with low < high");
  expect("s13", "name: s13\nops: [x]\n" + tol + "cost: 5\n", ":4:7: 'cost' must be a mapping");
  expect("s14", "name: s14\nops: [x]\n" + tol + "verify: {max_declined: 1.5}\n",
         ":4:24: verify.max_declined must be a share of the cases, 0 to 1");
  expect("s14b", "name: s14b\nops: [x]\n" + tol + "compare_float64: yes please\n",
         ":4:18: compare_float64 must be true or false");
  // The signature family: what runtime/common/signature_family.h parses, and can hold.
  expect("s15", "name: s15\nops: [x]\n" + tol + "signature_family: {vary: [{arg: 0, dim: 0}], pins: [{arg: 3, vary: 1}]}\n",
         ":4:19: signature_family: pins entry {arg: 3, vary: 1} names no vary entry (there are 1)");
  expect("s16", "name: s16\nops: [x]\n" + tol + "signature_family: {vary: [{arg: 0}]}\n",
         ":4:19: signature_family: malformed (vary: [{arg, dim}], pins: [{arg, vary}], contiguous: bool, "
         "vary_outputs: [k]): [json.exception.out_of_range.403] key 'dim' not found");
  fs::path missing = dir / "nope" / "family.yaml";
  CHECK(error_of(missing) == missing.string() + ": cannot read the file");
}


namespace {

json tensor(const char* dtype, std::vector<int64_t> sizes, std::vector<int64_t> strides) {
  return {{"type", "Tensor"}, {"dtype", dtype}, {"sizes", sizes}, {"strides", strides}, {"device", "cpu"}};
}

Target target(const std::string& op, json args, json outputs) {
  Target t;
  t.op = op;
  t.id = "m/" + op + "/0";
  t.args = std::move(args);
  t.outputs = std::move(outputs);
  return t;
}

}  // namespace

TEST_CASE("an op no family.yaml covers gets a family derived from the captured call") {
  const auto families = load_families(default_targets_dir());
  // div.Tensor_mode(Tensor self, Tensor other, *, str? rounding_mode): a str
  // argument rides in the ABI too (binary's family.yaml covers div.Tensor only).
  const Target div = target("div.Tensor_mode",
                            json::array({tensor("float32", {4, 64}, {64, 1}), tensor("float32", {4, 64}, {64, 1}),
                                         {{"type", "str"}, {"value", "floor"}}}),
                            json::array({tensor("float32", {4, 64}, {64, 1})}));
  std::string why;
  auto f = family_of(families, div, &why);
  REQUIRE(f);
  CHECK(why.empty());
  CHECK(f->derived);
  CHECK(f->path.empty());
  CHECK(f->name == "div.Tensor_mode");
  CHECK(f->ops == std::vector<std::string>{"div.Tensor_mode"});
  CHECK(f->spec["signature_family"]["contiguous"] == true);
  CHECK_FALSE(f->spec["signature_family"].contains("vary"));  // nothing varies
  CHECK(f->spec["verify"]["specials"] == json::array({"nan", "pos_inf"}));
  CHECK(f->spec["cost"]["reads"] == json::array({0, 1}));
  CHECK(f->spec["cost"]["writes"] == json::array({0}));
  CHECK(f->text.find("derived from the captured call") != std::string::npos);
  CHECK(f->digest == sha256_hex(f->text));

  // A transposed (non-contiguous) input: the family keeps its strides exactly.
  const Target ln = target("native_layer_norm",
                           json::array({tensor("float32", {64, 32}, {1, 64}), {{"type", "int[]"}, {"value", {32}}},
                                        {{"type", "None"}}, {{"type", "None"}}, {{"type", "float"}, {"value", 1e-5}}}),
                           json::array({tensor("float32", {64, 32}, {32, 1})}));
  auto derived_ln = derive_family(ln);
  CHECK(derived_ln.spec["signature_family"]["contiguous"] == false);
  // ... while family_of takes the hand-written family for that op.
  auto hand = family_of(families, ln);
  REQUIRE(hand);
  CHECK_FALSE(hand->derived);
  CHECK(hand->name == "layer_norm");
  // Refined by the captured layout: the transposed call keeps its strides.
  CHECK(hand->spec["signature_family"]["contiguous"] == false);
  CHECK(hand->digest != load_family(default_targets_dir() / "layer_norm" / "family.yaml").digest);

  // Integer inputs only (an index op): no float specials.
  const Target idx = target("bincount", json::array({tensor("int64", {100}, {1}), {{"type", "None"}},
                                                     {{"type", "int"}, {"value", 0}}}),
                            json::array({tensor("int64", {10}, {1})}));
  auto bin = family_of(families, idx);
  REQUIRE(bin);
  CHECK_FALSE(bin->spec["verify"].contains("specials"));
}

TEST_CASE("a call the candidate ABI cannot express has no family, and the reason names the argument") {
  const auto families = load_families(default_targets_dir());
  auto why_not = [&](json args) {
    std::string why;
    CHECK_FALSE(family_of(families, target("some_op", std::move(args), json::array()), &why));
    return why;
  };
  CHECK(why_not(json::array({tensor("complex64", {4}, {1})})) ==
        "the candidate ABI cannot express the call: argument 0 has dtype complex64, not in the candidate ABI");
  CHECK(why_not(json::array({tensor("float32", {4}, {1}), {{"type", "Tensor[]"}, {"value", json::array()}}})) ==
        "the candidate ABI cannot express the call: argument 1 of type Tensor[] has no representation in the "
        "candidate ABI");
  CHECK(why_not(json::array({tensor("float32", {1, 1, 1, 1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 1, 1, 1, 1, 1})})) ==
        "the candidate ABI cannot express the call: argument 0 has 9 dims (ABI max 8)");
  CHECK(why_not(json::array({{{"type", "str"}, {"value", std::string(64, 'x')}}})) ==
        "the candidate ABI cannot express the call: argument 0 (str) is longer than 63 bytes (ABI max)");
  CHECK(why_not(json::array({{{"type", "Generator"}}})).find("Generator has no representation") != std::string::npos);
}

TEST_CASE("a chain target's derived family says what the fused kernel computes, op by op") {
  Target t;
  t.op = "forge_chain::c_0123456789abcdef";
  t.args = json::array({tensor("float32", {4, 8}, {8, 1}), tensor("float32", {4, 8}, {8, 1})});
  t.outputs = json::array({tensor("float32", {4, 8}, {8, 1})});
  t.chain = json::parse(R"({"inputs": 2, "outputs": 1, "ops": [
      {"op": "aten::exp", "overload": "", "args": [{"ref": {"input": 0}}]},
      {"op": "aten::add", "overload": "Tensor",
       "args": [{"ref": {"op": 0, "output": 0}}, {"ref": {"input": 1}}, {"type": "int", "value": 2}]}]})");
  Family f = derive_family(t);
  CHECK(f.derived);
  CHECK(f.text.find("A chain of ATen ops") != std::string::npos);
  CHECK(f.text.find("#   op0 = aten::exp(input 0)\n") != std::string::npos);
  CHECK(f.text.find("#   op1 = aten::add.Tensor(op0 return 0, input 1, 2)\n") != std::string::npos);
  CHECK(f.spec["cost"]["reads"] == json::array({0, 1}));
  // A fused kernel nearer the float64 chain than the stock chain's per-op roundings is not wrong.
  CHECK(f.spec.value("compare_float64", false));
  t.chain = json();
  CHECK_FALSE(derive_family(t).spec.value("compare_float64", false));
}

TEST_SUITE_END();
}  // namespace forge
