// "llm" actions in the MCTS tree beside strategy actions, and the prompts.
#include <doctest/doctest.h>

#include "rules/llm/prompt.h"
#include "rules/llm/proposer.h"
#include "rules/search/strategies.h"

namespace forge {
using nlohmann::json;

TEST_SUITE_BEGIN("rules::LlmProposer");

namespace {

class FixedProposer : public mcts::Proposer {
 public:
  std::vector<mcts::Action> actions(const mcts::Tree&, mcts::NodeId parent, mcts::Rng&) override {
    if (parent != mcts::kRoot) return {};
    return {{"strategy", "a", json{{"X", 1}}, ""}, {"strategy", "b", json{{"X", 1}}, ""}};
  }
};

}  // namespace

TEST_CASE("variants under verified nodes, with what was tried around them; mixed with strategies") {
  mcts::Tree tree;
  FixedProposer strategies;
  LlmProposer model(2);
  MixedProposer mixed({&strategies, &model});
  mcts::Search search(tree, mixed, {});
  mcts::Rng rng(1);

  auto root = mixed.actions(tree, mcts::kRoot, rng);
  REQUIRE(root.size() == 4);
  CHECK(root[0].kind == "strategy");
  CHECK(root[1].kind == "llm");
  CHECK(root[1].params == json{{"variant", 0}});
  CHECK(root[2].strategy == "b");
  CHECK(root[3].params == json{{"variant", 1}});
  CHECK(root[1].parent_note == "");

  // A strategy child that verified at 1.5x, and a model child that did not compile.
  mcts::NodeId a = search.begin_expansion({mcts::kRoot, root[0]});
  mcts::Outcome ok;
  ok.status = mcts::Outcome::Status::Ok;
  ok.speedup = 1.5;
  search.complete(a, ok);
  mcts::NodeId m = search.begin_expansion({mcts::kRoot, root[1]});
  mcts::Outcome bad;
  bad.status = mcts::Outcome::Status::CompileError;
  bad.reason = "compile_error: expected ';'";
  search.complete(m, bad);

  auto under_a = model.actions(tree, a, rng);
  REQUIRE(under_a.size() == 2);
  CHECK(under_a[0].parent_note ==
        "- ancestor node 1, strategy a {\"X\":1}: ok 1.5x stock\n");
  auto under_root = model.actions(tree, mcts::kRoot, rng);
  CHECK(under_root[0].parent_note ==
        "- tried from here, node 1, strategy a {\"X\":1}: ok 1.5x stock\n"
        "- tried from here, node 2, model variant 1 (from scratch): compile_error: "
        "compile_error: expected ';'\n");
  // Nothing is asked under a kernel that failed.
  CHECK(model.actions(tree, m, rng).empty());
  // The search skips what was tried: next under the root is strategy b.
  CHECK(search.propose(mcts::kRoot)->strategy == "b");
}

TEST_CASE("the variant prompt carries the op, ABI, rules, device, parent and history") {
  auto t = llm::load_prompt_templates(llm::default_prompts_dir());
  llm::PromptFacts f;
  f.op = "_softmax";
  f.signature = "_softmax(f32[64,1000]{1000,1}, -1, False)";
  f.family = "softmax";
  f.args = "[]";
  f.outputs = "[]";
  f.family_yaml = "# softmax along the last dimension\nname: softmax\n";
  f.abi_header = "typedef struct forge_call {} forge_call;";
  f.device_name = "Test CPU";
  f.arch = "x86_64";
  f.ceiling_bytes_per_s = 2e10;
  f.bytes = 512000;
  f.floor_us = 25.6;
  f.stock_us = 80;
  f.parent_what = "strategy rows_3pass {\"ISA\":0}";
  f.parent_source = "int forge_kernel(const forge_call* c) { return 0; }\n";
  f.parent_us = 40;
  f.parent_speedup = 2;
  f.parent_floor_pct = 64;
  f.history = "- ancestor node 1: ok 2x stock\n";
  f.variant = 1;
  f.variants = 3;
  llm::Request r = llm::variant_request(t, f);
  CHECK(r.variant == 1);
  CHECK(r.system.find("typedef struct forge_call {} forge_call;") != std::string::npos);
  CHECK(r.system.find("`thread`") != std::string::npos);  // the static rules
  CHECK(r.system.find("```cpp") != std::string::npos);
  REQUIRE(r.messages.size() == 1);
  const std::string& u = r.messages[0].text;
  for (const char* part : {"aten::_softmax", "f32[64,1000]", "# softmax along the last dimension",
                           "Test CPU (x86_64)", "20 GB/s", "25.6 us", "80 us per call",
                           "40 us per call, 2x stock, 64% of the bandwidth floor.",
                           "int forge_kernel(const forge_call* c) { return 0; }",
                           "- ancestor node 1: ok 2x stock", "variant 2 of 3"}) {
    CAPTURE(part);
    CHECK(u.find(part) != std::string::npos);
  }
  CHECK(u.find("{{") == std::string::npos);

  llm::Request fix = llm::repair_request(t, r, "my reply", "It does not compile:",
                                         std::string(10000, 'e'), 600);
  REQUIRE(fix.messages.size() == 3);
  CHECK(fix.messages[1].role == "assistant");
  CHECK(fix.messages[1].text == "my reply");
  CHECK(fix.messages[2].text.find("It does not compile:") == 0);
  CHECK(fix.messages[2].text.find("characters left out") != std::string::npos);
  CHECK(fix.messages[2].text.size() < 1200);
}

TEST_CASE("a template placeholder without a value is an error") {
  CHECK(llm::render("a {{x}} b", {{"x", "1"}}) == "a 1 b");
  CHECK(llm::render("{{x}}", {{"x", "{{y}}"}}) == "{{y}}");  // values are not re-read
  CHECK_THROWS_WITH(llm::render("a {{nope}}", {}), "prompt template: no value for {{nope}}");
}

TEST_SUITE_END();
}  // namespace forge
