// Chains of ops from the capture's data flow (rules/capture/chains.h), on
// synthetic capture records: no torch.
#include <doctest/doctest.h>

#include <algorithm>

#include "rules/capture/chain_target.h"
#include "rules/capture/chains.h"

namespace forge {
using nlohmann::json;

TEST_SUITE_BEGIN("rules::Chains");

namespace {

json tensor() {
  return {{"type", "Tensor"}, {"dtype", "float32"}, {"sizes", {4, 8}}, {"strides", {8, 1}}, {"device", "cpu"}};
}

// An entry of `calls` calls taking one float tensor and returning one.
json entry(const char* op, long calls, double time_us, const char* kind = "kernel") {
  return {{"op", op},         {"kind", kind},      {"dispatch_key", "CPU"},
          {"args", {tensor()}}, {"outputs", {tensor()}}, {"calls", calls},
          {"time_us", time_us}, {"signature", std::string("aten::") + op + "(...)"}};
}

json flow(int from, int to, long calls, int out = 0, int in = 0) {
  return {{"from", from}, {"out", out}, {"to", to}, {"in", in}, {"calls", calls}};
}

json produced(int entry, long tensors, int out = 0) { return {{"entry", entry}, {"out", out}, {"tensors", tensors}}; }

std::vector<std::vector<std::string>> op_lists(const std::vector<Chain>& chains) {
  std::vector<std::vector<std::string>> out;
  for (const auto& c : chains) out.push_back(c.ops);
  return out;
}

}  // namespace

TEST_CASE("a run of ops whose every output feeds only the next is one chain, its time the sum") {
  // pow -> mean -> add -> rsqrt, 3 calls each; rsqrt's output read by nothing recorded.
  json rec = {{"entries", {entry("pow.Tensor_Scalar", 3, 10), entry("mean.dim", 3, 20), entry("add.Tensor", 3, 5),
                           entry("rsqrt", 3, 5)}},
              {"flows", {flow(0, 1, 3), flow(1, 2, 3), flow(2, 3, 3)}},
              {"produced", {produced(0, 3), produced(1, 3), produced(2, 3), produced(3, 3)}}};
  auto chains = find_chains(rec, "cpu");
  REQUIRE(chains.size() == 1);
  CHECK(chains[0].ops == std::vector<std::string>{"pow.Tensor_Scalar", "mean.dim", "add.Tensor", "rsqrt"});
  CHECK(chains[0].calls == 3);
  CHECK(chains[0].time_us == doctest::Approx(40));
  json j = chain_json(chains[0], "m", 80);
  CHECK(j["share"].get<double>() == doctest::Approx(0.5));
  CHECK(j["searched"] == false);
}

TEST_CASE("a chain's target: inputs read from outside in reading order, each op's link to the one before") {
  // exp -> mul(exp's out, y) -> add(x2, mul's out): y and x2 come from outside.
  json two = entry("mul.Tensor", 2, 1);
  two["args"] = {tensor(), tensor()};
  json add = entry("add.Tensor", 2, 1);
  add["args"] = {tensor(), tensor(), {{"type", "int"}, {"value", 1}}};
  json first = entry("exp", 2, 1);
  first["samples"] = {{{"inputs", {{{"digest", "d0"}}}}}, {{"inputs", {{{"digest", "d1"}}}}}};
  two["samples"] = {{{"inputs", {nullptr, {{"digest", "y0"}}}}}};
  add["samples"] = {{{"inputs", {{{"digest", "x0"}}, nullptr, nullptr}}}};
  json rec = {{"entries", {first, two, add}},
              {"flows", {flow(0, 1, 2, 0, 0), flow(1, 2, 2, 0, 1)}},
              {"produced", {produced(0, 2), produced(1, 2), produced(2, 2)}}};
  auto chains = find_chains(rec, "cpu");
  REQUIRE(chains.size() == 1);
  std::string why;
  auto t = chain_target("m", rec, chains[0], &why);
  REQUIRE_MESSAGE(t, why);
  CHECK(t->id.rfind("m/chain/", 0) == 0);
  CHECK(t->op.rfind("forge_chain::c_", 0) == 0);
  REQUIRE(t->args.size() == 3);  // exp's input, mul's second, add's first
  CHECK(t->args[0]["name"] == "op0_arg0");
  const json& ops = t->chain["ops"];
  REQUIRE(ops.size() == 3);
  CHECK(ops[0]["op"] == "aten::exp");
  CHECK(ops[1]["op"] == "aten::mul");
  CHECK(ops[1]["overload"] == "Tensor");
  CHECK(ops[0]["args"][0]["ref"] == json{{"input", 0}});
  CHECK(ops[1]["args"][0]["ref"] == json{{"op", 0}, {"output", 0}});
  CHECK(ops[1]["args"][1]["ref"] == json{{"input", 1}});
  CHECK(ops[2]["args"][0]["ref"] == json{{"input", 2}});
  CHECK(ops[2]["args"][1]["ref"] == json{{"op", 1}, {"output", 0}});
  CHECK_FALSE(ops[2]["args"][2].contains("ref"));  // a constant stays as captured
  CHECK(t->chain["inputs"] == 3);
  CHECK(t->chain["outputs"] == 1);
  // One sample: the fewest any input's op kept, each input from its own op's call.
  REQUIRE(t->sample_inputs.size() == 1);
  CHECK(t->sample_inputs[0]["inputs"] == json{{{"digest", "d0"}}, {{"digest", "y0"}}, {{"digest", "x0"}}});
  // The definition names the op: another constant is another op.
  json rec2 = rec;
  rec2["entries"][2]["args"][2]["value"] = 2;
  auto t2 = chain_target("m", rec2, find_chains(rec2, "cpu")[0], &why);
  REQUIRE(t2);
  CHECK(t2->op != t->op);
  // The data flow looks through views: a consumer that read mul's output
  // reshaped is no link a chain's op can carry, and the chain says why.
  json rec3 = rec;
  rec3["entries"][2]["args"][1]["sizes"] = {32};
  rec3["entries"][2]["args"][1]["strides"] = {1};
  auto t3 = chain_target("m", rec3, find_chains(rec3, "cpu")[0], &why);
  CHECK_FALSE(t3);
  CHECK(why.find("view") != std::string::npos);
}

TEST_CASE("an out= variant the program reached through its functional op is that op in the chain") {
  // torch.abs(x) runs abs.out(x, out=<empty>) on the backend; then add(abs's out, 1).
  json abs = entry("abs.out", 2, 1);
  abs["outer_op"] = "abs";
  json out = tensor();
  out["name"] = "out";
  out["changed"] = true;
  abs["args"] = {tensor(), out};
  json add = entry("add.Tensor", 2, 1);
  add["args"] = {tensor(), {{"type", "float"}, {"value", 1.0}}, {{"type", "int"}, {"value", 1}}};
  json rec = {{"entries", {abs, add}},
              {"flows", {flow(0, 1, 2, 0, 0)}},
              {"produced", {produced(0, 2), produced(1, 2)}}};
  auto chains = find_chains(rec, "cpu");
  REQUIRE(chains.size() == 1);
  std::string why;
  auto t = chain_target("m", rec, chains[0], &why);
  REQUIRE_MESSAGE(t, why);
  const json& ops = t->chain["ops"];
  CHECK(ops[0]["op"] == "aten::abs");
  CHECK(ops[0]["overload"] == "");
  CHECK(ops[0]["args"].size() == 1);  // the out buffer is gone, and is no input
  CHECK(t->chain["inputs"] == 1);
  // Called as abs.out by the program itself (another outer op): the buffer stays an input.
  rec["entries"][0]["outer_op"] = "linear";
  t = chain_target("m", rec, find_chains(rec, "cpu")[0], &why);
  REQUIRE(t);
  CHECK(t->chain["ops"][0]["overload"] == "out");
  CHECK(t->chain["inputs"] == 2);
}

TEST_CASE("an intermediate another op also reads cuts the chain there") {
  // exp's output goes to mul and to add: exp is no link; mul -> add is.
  json rec = {{"entries", {entry("exp", 2, 1), entry("mul.Tensor", 2, 1), entry("add.Tensor", 2, 1)}},
              {"flows", {flow(0, 1, 2), flow(0, 2, 2, 0, 1), flow(1, 2, 2)}},
              {"produced", {produced(0, 2), produced(1, 2), produced(2, 2)}}};
  CHECK(op_lists(find_chains(rec, "cpu")) == std::vector<std::vector<std::string>>{{"mul.Tensor", "add.Tensor"}});
}

TEST_CASE("an output read on only some calls, or an op called in two places, links nothing") {
  // relu's 4 outputs, 3 read by silu: one escaped (a model output, say).
  json partial = {{"entries", {entry("relu", 4, 1), entry("silu", 3, 1)}},
                  {"flows", {flow(0, 1, 3)}},
                  {"produced", {produced(0, 4), produced(1, 3)}}};
  CHECK(find_chains(partial, "cpu").empty());
  // A second output of the producer read elsewhere (max.dim's indices) escapes too.
  json second = {{"entries", {entry("max.dim", 2, 1), entry("exp", 2, 1), entry("neg", 2, 1)}},
                 {"flows", {flow(0, 1, 2, 0), flow(0, 2, 2, 1)}},
                 {"produced", {produced(0, 2, 0), produced(0, 2, 1), produced(1, 2), produced(2, 2)}}};
  CHECK(find_chains(second, "cpu").empty());
}

TEST_CASE("GEMMs, views and random ops take no part; a chain starts after a matmul") {
  json rec = {{"entries", {entry("addmm", 2, 50), entry("gelu", 2, 3), entry("mul.Tensor", 2, 2),
                           entry("view", 2, 0, "view"), entry("uniform_", 2, 1)}},
              {"flows", {flow(0, 1, 2), flow(1, 2, 2), flow(2, 3, 2), flow(4, 1, 2, 0, 1)}},
              {"produced", {produced(0, 2), produced(1, 2), produced(2, 2), produced(3, 2), produced(4, 2)}}};
  rec["entries"][4]["args"] = json::array({json{{"type", "Generator"}, {"name", "generator"}}});
  CHECK(op_lists(find_chains(rec, "cpu")) == std::vector<std::vector<std::string>>{{"gelu", "mul.Tensor"}});
}

TEST_CASE("two producers merging into one op keep their own chains apart") {
  // a -> c and b -> c with both links clean: c has two predecessors, no chain through it.
  json rec = {{"entries", {entry("exp", 1, 1), entry("tanh", 1, 1), entry("add.Tensor", 1, 1), entry("neg", 1, 1)}},
              {"flows", {flow(0, 2, 1), flow(1, 2, 1, 0, 1), flow(2, 3, 1)}},
              {"produced", {produced(0, 1), produced(1, 1), produced(2, 1), produced(3, 1)}}};
  CHECK(op_lists(find_chains(rec, "cpu")) == std::vector<std::vector<std::string>>{{"add.Tensor", "neg"}});
}

TEST_CASE("a chain is a module's whole forward when that module ran no other kernel itself") {
  json rec = {{"entries", {entry("pow.Tensor_Scalar", 1, 1), entry("mean.dim", 1, 1), entry("view", 1, 0, "view"),
                           entry("exp", 1, 1)}},
              {"flows", {flow(0, 1, 1)}},
              {"produced", {produced(0, 1), produced(1, 1), produced(3, 1)}}};
  for (int i : {0, 1, 2}) {
    rec["entries"][i]["module"] = "m.Block/m.Norm";
    rec["entries"][i]["modules"] = {{"m.Block/m.Norm", 1}};
  }
  auto chains = find_chains(rec, "cpu");
  REQUIRE(chains.size() == 1);
  CHECK(chains[0].module == "m.Block/m.Norm");
  CHECK(chains[0].whole_forward);  // the view needs no kernel
  rec["entries"][3]["module"] = "m.Block/m.Norm";  // exp ran in the module too, outside the chain
  rec["entries"][3]["modules"] = {{"m.Block/m.Norm", 1}};
  chains = find_chains(rec, "cpu");
  REQUIRE(chains.size() == 1);
  CHECK_FALSE(chains[0].whole_forward);
  rec["entries"][1]["modules"] = {{"m.Block/m.Norm", 1}, {"m.Other", 1}};  // mean under two modules
  CHECK(find_chains(rec, "cpu")[0].module.empty());
}

TEST_CASE("a chain across modules also yields each run of it that is one module's whole forward") {
  // sigmoid -> mul under m.Swish, then sum outside it: the whole chain, and Swish's run.
  json rec = {{"entries", {entry("sigmoid", 2, 1), entry("mul.Tensor", 2, 1), entry("sum", 2, 1), entry("exp", 2, 1)}},
              {"flows", {flow(0, 1, 2), flow(1, 2, 2)}},
              {"produced", {produced(0, 2), produced(1, 2), produced(2, 2), produced(3, 2)}}};
  for (int i : {0, 1}) {
    rec["entries"][i]["module"] = "m.Net/m.Swish";
    rec["entries"][i]["modules"] = {{"m.Net/m.Swish", 2}};
  }
  auto chains = find_chains(rec, "cpu");
  CHECK(op_lists(chains) == std::vector<std::vector<std::string>>{{"sigmoid", "mul.Tensor", "sum"},
                                                                  {"sigmoid", "mul.Tensor"}});
  REQUIRE(chains.size() == 2);
  CHECK(chains[0].module.empty());
  CHECK(chains[1].module == "m.Net/m.Swish");
  CHECK(chains[1].whole_forward);
  // A run that is not the module's whole forward (exp ran there too) is no chain of its own.
  rec["entries"][3]["module"] = "m.Net/m.Swish";
  rec["entries"][3]["modules"] = {{"m.Net/m.Swish", 2}};
  CHECK(op_lists(find_chains(rec, "cpu")) == std::vector<std::vector<std::string>>{{"sigmoid", "mul.Tensor", "sum"}});
}

TEST_CASE("a chain through a module's submodules is that module's whole forward when it ran nothing else") {
  // Block.forward = silu(self.gn(x)): group_norm under Block/GroupNorm, silu under Block.
  json rec = {{"entries", {entry("native_group_norm", 2, 1), entry("silu", 2, 1), entry("exp", 2, 1)}},
              {"flows", {flow(0, 1, 2)}},
              {"produced", {produced(0, 2), produced(1, 2), produced(2, 2)}}};
  rec["entries"][0]["module"] = "m.Net/m.Block/nn.GroupNorm";
  rec["entries"][0]["modules"] = {{"m.Net/m.Block/nn.GroupNorm", 2}};
  rec["entries"][1]["module"] = "m.Net/m.Block";
  rec["entries"][1]["modules"] = {{"m.Net/m.Block", 2}};
  rec["entries"][2]["module"] = "m.Net";  // the parent's own op: outside Block
  rec["entries"][2]["modules"] = {{"m.Net", 2}};
  auto chains = find_chains(rec, "cpu");
  REQUIRE(chains.size() == 1);
  CHECK(chains[0].module == "m.Net/m.Block");
  CHECK(chains[0].whole_forward);
  // A second op inside Block's subtree (under its GroupNorm, say): no longer the whole forward.
  rec["entries"][2]["module"] = "m.Net/m.Block/nn.GroupNorm";
  rec["entries"][2]["modules"] = {{"m.Net/m.Block/nn.GroupNorm", 2}};
  CHECK_FALSE(find_chains(rec, "cpu")[0].whole_forward);
}

namespace {

// MinGPT's GELU, 0.5 * x * (1 + tanh(c * (x + 0.044715 * x^3))), as a module's
// forward: x is read by three ops, and two branches meet in the last mul.
json mingpt_gelu(const char* path) {
  json two = tensor();
  json rec = {{"entries",
               {entry("mul.Tensor", 2, 1), entry("pow.Tensor_Scalar", 2, 1), entry("mul.Tensor", 2, 1),
                entry("add.Tensor", 2, 1), entry("mul.Tensor", 2, 1), entry("tanh", 2, 1), entry("add.Tensor", 2, 1),
                entry("mul.Tensor", 2, 1)}},
              {"flows",
               {flow(1, 2, 2), flow(2, 3, 2, 0, 1), flow(3, 4, 2), flow(4, 5, 2), flow(5, 6, 2), flow(6, 7, 2, 0, 1),
                flow(0, 7, 2)}},
              {"produced", json::array()}};
  for (int i = 0; i < 8; ++i) {
    rec["produced"].push_back(produced(i, 2));
    rec["entries"][i]["signature"] = "op" + std::to_string(i);  // one entry per call site
    rec["entries"][i]["module"] = path;
    rec["entries"][i]["modules"] = {{path, 2}};
  }
  for (int i : {0, 3, 7}) rec["entries"][i]["args"] = {tensor(), tensor()};
  return rec;
}

}  // namespace

TEST_CASE("a module's whole forward is one chain whatever the shape of its data flow") {
  json rec = mingpt_gelu("kb.Model");
  auto chains = find_chains(rec, "cpu");
  REQUIRE(chains.size() == 1);  // the run pow -> ... -> add inside it is no chain of its own
  CHECK(chains[0].entries.size() == 8);
  CHECK(chains[0].entries.back() == 7);  // the last op is the one whose output leaves
  CHECK(chains[0].module == "kb.Model");
  CHECK(chains[0].whole_forward);
  CHECK(chains[0].calls == 2);
  // Every op comes after the ops it reads.
  for (size_t j = 0; j < chains[0].entries.size(); ++j)
    for (const auto& f : rec["flows"])
      if (f["to"] == chains[0].entries[j])
        CHECK(std::find(chains[0].entries.begin(), chains[0].entries.begin() + static_cast<long>(j),
                        f["from"].get<int>()) != chains[0].entries.begin() + static_cast<long>(j));
  std::string why;
  auto t = chain_target("m", rec, chains[0], &why);
  REQUIRE_MESSAGE(t, why);
  CHECK(t->chain["ops"].size() == 8);
}

TEST_CASE("a forward chain: instances of one class under several paths are one class") {
  json rec = mingpt_gelu("m.Net/m.Layer/m.Gelu");
  for (int i = 0; i < 8; ++i) rec["entries"][i]["modules"] = {{"m.Net/m.Layer/m.Gelu", 1}, {"m.Net/m.Gelu", 1}};
  auto chains = find_chains(rec, "cpu");
  REQUIRE(chains.size() == 1);
  CHECK(chains[0].module == "m.Net/m.Layer/m.Gelu");
  CHECK(chains[0].whole_forward);
}

TEST_CASE("no forward chain where an intermediate escapes, an op is no kernel, or the forward differs by shape") {
  SUBCASE("an intermediate also read outside the module") {
    json rec = mingpt_gelu("kb.Model");
    rec["entries"].push_back(entry("exp", 2, 1));
    rec["flows"].push_back(flow(5, 8, 2));  // tanh's output read by exp, outside
    for (const auto& c : find_chains(rec, "cpu")) CHECK(c.entries.size() < 8);
  }
  SUBCASE("an op of the forward that can be no chain op (a composite cast)") {
    json rec = mingpt_gelu("kb.Model");
    rec["entries"][5]["kind"] = "composite";
    for (const auto& c : find_chains(rec, "cpu")) CHECK_FALSE(c.whole_forward);
  }
  SUBCASE("an op of the forward also called outside it") {
    json rec = mingpt_gelu("kb.Model");
    rec["entries"][0]["modules"] = {{"kb.Model", 2}, {"", 2}};
    rec["entries"][0]["calls"] = 4;
    for (const auto& c : find_chains(rec, "cpu")) CHECK_FALSE(c.whole_forward);
  }
  SUBCASE("a second group of other ops under the class") {
    json rec = mingpt_gelu("kb.Model");
    rec["entries"].push_back(entry("exp", 2, 1));
    rec["entries"].push_back(entry("neg", 2, 1));
    rec["flows"].push_back(flow(8, 9, 2));
    rec["produced"].push_back(produced(8, 2));
    for (int i : {8, 9}) rec["entries"][i]["modules"] = {{"kb.Model", 2}};
    for (const auto& c : find_chains(rec, "cpu")) CHECK_FALSE(c.whole_forward);
  }
  SUBCASE("a cycle through entries that signature-sharing calls made one") {
    json rec = mingpt_gelu("kb.Model");
    rec["flows"].push_back(flow(7, 1, 2));
    for (const auto& c : find_chains(rec, "cpu")) CHECK(c.entries.size() < 8);
  }
}

TEST_CASE("two reads of one tensor are one chain input, partial samples included; other data, two") {
  // Swish: sigmoid(x) -> mul(x, .), x large enough that its samples are partial.
  json mul = entry("mul.Tensor", 1, 1);
  mul["args"] = {tensor(), tensor()};
  json sig = entry("sigmoid", 1, 1);
  sig["samples"] = {{{"inputs", {{{"digest", "lead"}, {"stored_numel", 16}}}}}};
  mul["samples"] = {{{"inputs", {{{"digest", "lead"}, {"stored_numel", 16}}, nullptr}}}};
  json rec = {{"entries", {sig, mul}}, {"flows", {flow(0, 1, 1, 0, 1)}}, {"produced", {produced(0, 1), produced(1, 1)}}};
  auto chains = find_chains(rec, "cpu");
  REQUIRE(chains.size() == 1);
  std::string why;
  auto t = chain_target("m", rec, chains[0], &why);
  REQUIRE_MESSAGE(t, why);
  CHECK(t->args.size() == 1);
  CHECK(t->chain["ops"][1]["args"][0]["ref"] == json{{"input", 0}});
  rec["entries"][1]["samples"][0]["inputs"][0]["digest"] = "other";  // another leading part: another tensor
  t = chain_target("m", rec, chains[0], &why);
  REQUIRE_MESSAGE(t, why);
  CHECK(t->args.size() == 2);
}

TEST_CASE("a cast into a fresh tensor is a chain op: _to_copy of its source, its destination no input") {
  // x.float() -> pow -> ... as a bf16 model's RMSNorm starts: copy_(empty f32, x bf16) under to.dtype.
  json cast = entry("copy_", 2, 1, "composite");
  cast["outer_op"] = "to.dtype";
  json src = tensor();
  src["dtype"] = "bfloat16";
  cast["args"] = {tensor(), src, {{"type", "bool"}, {"value", false}}};
  cast["samples"] = {{{"inputs", {{{"digest", "dst"}}, {{"digest", "x"}}, nullptr}}}};
  CHECK(cast_dtype(cast) == "float32");
  json rec = {{"entries", {cast, entry("exp", 2, 1)}}, {"flows", {flow(0, 1, 2)}}, {"produced", {produced(0, 2), produced(1, 2)}}};
  auto chains = find_chains(rec, "cpu");
  REQUIRE(chains.size() == 1);
  CHECK(chains[0].ops == std::vector<std::string>{"_to_copy", "exp"});  // as forge status lists it
  std::string why;
  auto t = chain_target("m", rec, chains[0], &why);
  REQUIRE_MESSAGE(t, why);
  REQUIRE(t->args.size() == 1);
  CHECK(t->args[0]["dtype"] == "bfloat16");  // the source; the empty destination is no input
  const json& op = t->chain["ops"][0];
  CHECK(op["op"] == "aten::_to_copy");
  CHECK(op["args"].size() == 2);
  CHECK(op["args"][1] == json{{"name", "dtype"}, {"type", "ScalarType"}, {"value", "float32"}});
  CHECK(t->sample_inputs[0]["inputs"] == json{{{"digest", "x"}}});
  // An in-place copy_ into a tensor the program made (no cast under .to()) is none.
  rec["entries"][0]["outer_op"] = "copy_";
  CHECK(cast_dtype(rec["entries"][0]).empty());
  CHECK(find_chains(rec, "cpu").empty());
}

TEST_CASE("a record without data flow (an older capture) has no chains") {
  json rec = {{"entries", {entry("relu", 1, 1)}}};
  CHECK(find_chains(rec, "cpu").empty());
}

namespace {

// A trace read (flows.h): call `from` of entry `fe` wrote output `out`, which
// call `to` of entry `te` read as argument `in`.
json read(long from, int fe, long to, int te, int in = 0, int out = 0) { return {from, fe, out, to, te, in}; }

}  // namespace

TEST_CASE("with a trace, one entry in two chains: each chain's calls are its own runs") {
  // A ResNet block twice: bn(0) -> relu_(1), then bn(0) -> add_(2) -> relu_(1);
  // bn, add_ and relu_ are one entry each (one signature). The aggregated
  // flows give bn two readers and relu_ two writers: no chain; the trace
  // tells the runs apart.
  json add = entry("add_.Tensor", 2, 4);
  add["args"] = {tensor(), tensor(), {{"type", "int"}, {"value", 1}}};
  json rec = {{"entries", {entry("native_batch_norm", 4, 40), entry("relu_", 4, 8), add}},
              {"flows", {flow(0, 1, 2), flow(0, 2, 2), flow(2, 1, 2)}},
              {"produced", {produced(0, 4), produced(1, 4), produced(2, 2)}}};
  CHECK(find_chains(rec, "cpu").empty());
  json reads = json::array();
  for (long b = 0; b < 2; ++b) {
    const long c = 10 * b;  // calls: bn 1, relu_ 2, bn 3, add_ 4 (reading relu_'s output too), relu_ 5
    reads.push_back(read(c + 1, 0, c + 2, 1));
    reads.push_back(read(c + 3, 0, c + 4, 2));
    reads.push_back(read(c + 2, 1, c + 4, 2, 1));  // the residual: read by add_ and by the next block
    reads.push_back(read(c + 2, 1, c + 11, 0));
    reads.push_back(read(c + 4, 2, c + 5, 1));
  }
  rec["traces"] = {{{"reads", reads}, {"open", json::array()}}};
  auto chains = find_chains(rec, "cpu");
  REQUIRE(op_lists(chains) == std::vector<std::vector<std::string>>{{"native_batch_norm", "add_.Tensor", "relu_"},
                                                                      {"native_batch_norm", "relu_"}});
  CHECK(chains[0].calls == 2);
  CHECK(chains[0].time_us == doctest::Approx(20 + 4 + 4));  // half of bn's and relu_'s calls, all of add_'s
  CHECK(chains[1].calls == 2);
  CHECK(chains[0].links == std::map<std::pair<int, int>, std::pair<int, int>>{{{1, 0}, {0, 0}}, {{2, 0}, {1, 0}}});
  std::string why;
  auto t = chain_target("m", rec, chains[0], &why);
  REQUIRE_MESSAGE(t, why);
  const json ops = t->chain["ops"];
  CHECK(ops[1]["args"][0]["ref"] == json{{"op", 0}, {"output", 0}});
  CHECK(ops[1]["args"][1]["ref"] == json{{"input", 1}});  // the residual comes from outside
  CHECK(ops[2]["args"][0]["ref"] == json{{"op", 1}, {"output", 0}});
  // The in-place ops change the previous op's result, which nothing else
  // reads: the definition computes their functional ops.
  CHECK(ops[1]["op"] == "aten::add");
  CHECK(ops[1]["overload"] == "Tensor");
  CHECK(ops[2]["op"] == "aten::relu");
  CHECK(ops[2]["overload"] == "");
  // As eager code calls them: a module forward's recorded calls match that.
  CHECK(ops[1]["called_as"] == json{{"op", "aten::add_"}, {"overload", "Tensor"}});
  CHECK(ops[2]["called_as"] == json{{"op", "aten::relu_"}, {"overload", ""}});
  CHECK_FALSE(ops[0].contains("called_as"));

  SUBCASE("a run that goes on in one call (into the script's checksum) counts for the shorter chain") {
    rec["entries"].push_back(entry("sum", 1, 2));
    rec["traces"][0]["reads"].push_back(read(15, 1, 16, 3));  // the second block's last relu_ -> sum
    chains = find_chains(rec, "cpu");
    REQUIRE(op_lists(chains) == std::vector<std::vector<std::string>>{{"native_batch_norm", "add_.Tensor", "relu_"},
                                                                        {"native_batch_norm", "relu_"}});
    CHECK(chains[0].calls == 2);
  }
  SUBCASE("a trace cut at its bound: runs it cut are not counted, calls scaled from those it saw") {
    rec["traces"][0]["open"] = {5};  // the first block's last relu_: its run's end is unknown
    chains = find_chains(rec, "cpu");
    REQUIRE(op_lists(chains) == std::vector<std::vector<std::string>>{{"native_batch_norm", "relu_"},
                                                                        {"native_batch_norm", "add_.Tensor", "relu_"}});
    // The trace saw every call of bn the entry counts: no scaling.
    CHECK(chains[1].calls == 1);
    rec["entries"][0]["calls"] = 10;  // twice the 5 calls the trace saw (call 21 a third block's)
    chains = find_chains(rec, "cpu");
    CHECK(chains[1].calls == 2);
    CHECK(chains[0].calls == 4);
  }
  SUBCASE("a call whose reads the trace did not finish (open) links to nothing") {
    rec["traces"][0]["open"] = {3, 13};  // the second bn of each block: add_ -> relu_ is left, and starts in place
    CHECK(op_lists(find_chains(rec, "cpu")) == std::vector<std::vector<std::string>>{{"native_batch_norm", "relu_"}});
  }
}

TEST_CASE("an in-place op's functional spelling") {
  CHECK(functional_spelling("relu_") == "relu");
  CHECK(functional_spelling("add_.Tensor") == "add.Tensor");
  CHECK(functional_spelling("pow_.Scalar") == "pow.Tensor_Scalar");  // pow.Scalar is a number to a tensor's power
  CHECK(functional_spelling("pow_.Tensor") == "pow.Tensor_Tensor");
  for (const char* same : {"relu", "add.Tensor", "__and__.Tensor", "_softmax", "_to_copy", "pow.Scalar"})
    CHECK(functional_spelling(same) == same);
  CHECK(in_place(entry("mul_.Tensor", 1, 1)));
  CHECK_FALSE(in_place(entry("__iand__.Tensor", 1, 1)));
  CHECK_FALSE(in_place(entry("_softmax", 1, 1)));
}

TEST_CASE("in-place ops: in a chain only on the previous op's result, never first, never an overwrite") {
  json rec = {{"entries", {entry("relu_", 1, 1), entry("mul.Tensor", 1, 1), entry("fill_.Scalar", 1, 1),
                           entry("sigmoid", 1, 1), entry("add_.Tensor", 1, 1)}},
              {"flows", json::array()},
              {"produced", json::array()}};
  SUBCASE("a leading in-place op changes a tensor from outside: the chain starts after it") {
    rec["traces"] = {{{"reads", {read(1, 0, 2, 1), read(2, 1, 3, 3)}}, {"open", json::array()}}};
    CHECK(op_lists(find_chains(rec, "cpu")) == std::vector<std::vector<std::string>>{{"mul.Tensor", "sigmoid"}});
  }
  SUBCASE("leading in-place calls are cut before runs are counted") {
    // relu_ -> mul -> sigmoid once, relu_ -> mul once: [mul, sigmoid] stays a chain.
    rec["traces"] = {{{"reads", {read(1, 0, 2, 1), read(2, 1, 3, 3), read(11, 0, 12, 1)}}, {"open", json::array()}}};
    const auto chains = find_chains(rec, "cpu");
    REQUIRE(op_lists(chains) == std::vector<std::vector<std::string>>{{"mul.Tensor", "sigmoid"}});
    CHECK(chains[0].calls == 1);
  }
  SUBCASE("an op that overwrites its self (fill_) reads nothing of it") {
    rec["traces"] = {{{"reads", {read(1, 3, 2, 2)}}, {"open", json::array()}}};
    CHECK(find_chains(rec, "cpu").empty());
  }
  SUBCASE("an in-place op linked through its second argument would change another tensor") {
    rec["traces"] = {{{"reads", {read(1, 3, 2, 4, 1)}}, {"open", json::array()}}};
    CHECK(find_chains(rec, "cpu").empty());
    rec["traces"] = {{{"reads", {read(1, 3, 2, 4, 0)}}, {"open", json::array()}}};
    CHECK(op_lists(find_chains(rec, "cpu")) == std::vector<std::vector<std::string>>{{"sigmoid", "add_.Tensor"}});
  }
}

TEST_CASE("a batch norm's parameters that agree in their samples stay inputs of their own") {
  // A fresh BatchNorm2d: weight and running variance ones, bias and running
  // mean zeros; the same samples, yet four tensors the chain's op gets apart.
  json bn = entry("native_batch_norm", 2, 4);
  json c = tensor();
  c["sizes"] = {8};
  c["strides"] = {1};
  bn["args"] = {tensor(), c, c, c, c, {{"type", "bool"}, {"value", false}}, {{"type", "float"}, {"value", 0.1}},
                {{"type", "float"}, {"value", 1e-5}}};
  bn["outputs"] = {tensor(), c, c};
  const json ones = {{"digest", "ones"}}, zeros = {{"digest", "zeros"}};
  bn["samples"] = {{{"inputs", {{{"digest", "x0"}}, ones, zeros, zeros, ones}}}};
  json rec = {{"entries", {bn, entry("relu", 2, 1)}},
              {"flows", {flow(0, 1, 2)}},
              {"produced", {produced(0, 2), produced(1, 2)}}};
  auto chains = find_chains(rec, "cpu");
  REQUIRE(chains.size() == 1);
  std::string why;
  auto t = chain_target("m", rec, chains[0], &why);
  REQUIRE_MESSAGE(t, why);
  CHECK(t->args.size() == 5);
}

TEST_CASE("a chain ending in a norm outputs the returns the program can read") {
  // relu -> native_group_norm, as nn.GroupNorm runs it: group_norm returns the
  // first result alone, so the statistics nothing reads are no outputs.
  json gn = entry("native_group_norm", 2, 4);
  json stat = tensor();
  stat["sizes"] = {4, 2};
  stat["strides"] = {2, 1};
  gn["args"] = {tensor(), {{"type", "None"}}, {{"type", "None"}}, {{"type", "int"}, {"value", 4}},
                {{"type", "int"}, {"value", 8}}, {{"type", "int"}, {"value", 1}}, {{"type", "int"}, {"value", 2}},
                {{"type", "float"}, {"value", 1e-5}}};
  gn["outputs"] = {tensor(), stat, stat};
  gn["outer_op"] = "group_norm";
  json rec = {{"entries", {entry("relu", 2, 1), gn}},
              {"flows", {flow(0, 1, 2)}},
              {"produced", {produced(0, 2), produced(1, 2)}}};
  auto outputs = [](const json& r) {
    std::string why;
    auto chains = find_chains(r, "cpu");
    REQUIRE(chains.size() == 1);
    auto t = chain_target("m", r, chains[0], &why);
    REQUIRE_MESSAGE(t, why);
    CHECK(t->outputs.size() == t->chain["outputs"].get<size_t>());
    return t->chain["outputs"].get<int>();
  };
  CHECK(outputs(rec) == 1);
  SUBCASE("a recorded op reads a statistic: the returns up to it") {
    rec["entries"].push_back(entry("exp", 2, 1));
    rec["flows"].push_back(flow(1, 2, 2, 1));
    rec["produced"].push_back(produced(2, 2));
    CHECK(outputs(rec) == 2);
  }
  SUBCASE("the program called the op itself: all of its returns") {
    rec["entries"][1]["outer_op"] = "native_group_norm";
    CHECK(outputs(rec) == 3);
  }
}

TEST_SUITE_END();
}  // namespace forge
