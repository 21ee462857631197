// Why a captured op is no target (rules/capture/selection.h), from synthetic
// capture records: no torch.
#include <doctest/doctest.h>

#include "rules/capture/selection.h"

namespace forge {
using nlohmann::json;

TEST_SUITE_BEGIN("rules::Selection");

namespace {

// nlohmann reads a one-element braced list as a copy of its element, so
// argument and output lists are spelled list(...).
template <typename... T>
json list(T... items) {
  return json::array({json(items)...});
}

json tensor(std::vector<int> sizes, const char* dtype = "float32", const char* device = "cpu") {
  std::vector<int> strides(sizes.size(), 1);
  for (size_t i = sizes.size(); i-- > 1;) strides[i - 1] = strides[i] * sizes[i];
  return {{"type", "Tensor"}, {"dtype", dtype}, {"sizes", sizes}, {"strides", strides}, {"device", device}};
}

json value(const char* type, json v) { return {{"type", type}, {"value", v}}; }

json named(const char* name, json rec) {
  rec["name"] = name;
  return rec;
}

json entry(const char* op, json args, json outputs, const char* kind = "kernel", const char* key = "CPU") {
  return {{"op", op}, {"kind", kind}, {"dispatch_key", key}, {"args", args}, {"outputs", outputs}};
}

std::optional<Selection> reason(const json& e, const char* backend = "cpu") {
  auto r = inherent_reason(e, backend);
  return r ? std::optional<Selection>(r->reason) : std::nullopt;
}

const json none_gen = named("generator", {{"type", "None"}});

}  // namespace

TEST_CASE("a plain kernel on the model's backend can be a target") {
  json e = entry("_softmax",
                 list(named("self", tensor({4, 8})), named("dim", value("int", -1)),
                      named("half_to_float", value("bool", false))),
                 list(tensor({4, 8})));
  CHECK_FALSE(inherent_reason(e, "cpu"));
}

TEST_CASE("views, allocations and custom ops are no targets") {
  CHECK(reason(entry("view", list(tensor({4})), list(tensor({4})), "view")) == Selection::View);
  CHECK(reason(entry("empty_strided", json::array(), list(tensor({4})), "alloc")) == Selection::Alloc);
  CHECK(reason(entry("mylib::fused", list(tensor({4})), list(tensor({4})), "foreign")) == Selection::NotAten);
}

TEST_CASE("an op at another dispatch key than the backend's is a host op") {
  json e = entry("add.Tensor", list(tensor({4}), tensor({4})), list(tensor({4})), "kernel", "CPU");
  auto r = inherent_reason(e, "cuda");
  REQUIRE(r);
  CHECK(r->reason == Selection::HostOp);
  CHECK(r->why.find("dispatch key CPU in a model on the cuda backend") != std::string::npos);
}

TEST_CASE("a copy between host and device is a transfer, whatever its dispatch key") {
  json e = entry("_to_copy", list(tensor({4}, "float32", "cpu")), list(tensor({4}, "float32", "cuda:0")));
  auto r = inherent_reason(e, "cuda");
  REQUIRE(r);
  CHECK(r->reason == Selection::Transfer);
  CHECK(r->why == "copies between cpu and cuda: bound by the link between them, not by a kernel");
  // Two GPUs are one device type: a device copy, a candidate.
  CHECK_FALSE(is_transfer(list(tensor({4}, "float32", "cuda:1")), list(tensor({4}, "float32", "cuda:0"))));
  // x * 0.5 on CUDA: the number is a 0-dim CPU tensor the kernel reads on the host, no copy.
  json mul = entry("mul.Tensor", json::array({tensor({4}, "float32", "cuda:0"), tensor({}, "float64", "cpu")}),
                   list(tensor({4}, "float32", "cuda:0")));
  mul["dispatch_key"] = "CUDA";
  CHECK_FALSE(is_transfer(mul["args"], mul["outputs"]));
  CHECK_FALSE(inherent_reason(mul, "cuda").has_value());
  // A copy of a one-element tensor of rank 1 still is one.
  CHECK(is_transfer(list(tensor({1}, "float32", "cpu")), list(tensor({1}, "float32", "cuda:0"))));
}

TEST_CASE("random-number ops: a generator argument, the samplers by name, dropout only in training") {
  CHECK(draws_random_numbers("uniform_", list(tensor({4}), none_gen)));
  CHECK(draws_random_numbers("bernoulli_.float", list(tensor({4}), none_gen)));
  CHECK(draws_random_numbers("some_new_sampler", list(tensor({4}), none_gen)));  // any op with a generator
  CHECK(draws_random_numbers("randperm", list(value("int", 8))));
  CHECK(draws_random_numbers("normal.Tensor_float", list(tensor({4}))));  // by name, without argument names
  const json p = value("float", 0.1);
  CHECK(draws_random_numbers("native_dropout", list(tensor({4}), p, named("train", value("bool", true)))));
  CHECK(draws_random_numbers("native_dropout", list(tensor({4}), p, named("train", {{"type", "None"}}))));
  // Eval mode: a deterministic copy.
  CHECK_FALSE(draws_random_numbers("native_dropout", list(tensor({4}), p, named("train", value("bool", false)))));
  CHECK_FALSE(draws_random_numbers("rrelu_with_noise", list(tensor({4}), tensor({4}),
                                                            named("training", value("bool", false)), none_gen)));
  // What a CPU dropout calls besides bernoulli_ is deterministic.
  CHECK_FALSE(draws_random_numbers("mul.Tensor", list(tensor({4}), tensor({4}))));
  CHECK_FALSE(draws_random_numbers("div_.Scalar", list(tensor({4}), value("float", 0.9))));

  auto r = inherent_reason(entry("uniform_", list(named("self", tensor({4})), none_gen), list(tensor({4}))), "cpu");
  REQUIRE(r);
  CHECK(r->reason == Selection::Random);  // before the ABI's objection to a Generator
}

TEST_CASE("the ABI's limits name the argument or output") {
  CHECK(abi_problem(list(named("self", tensor({4}))), list(tensor({4}))) == "");
  CHECK(abi_problem(list(named("tensors", value("Tensor[]", list(tensor({4}), tensor({4}))))), list(tensor({8}))) ==
        "argument 0 (tensors) of type Tensor[] has no representation in the candidate ABI");
  // str rides in the ABI (FORGE_ARG_STRING): gelu's approximate is no obstacle.
  CHECK(abi_problem(list(tensor({4}), named("approximate", value("str", "tanh"))), list(tensor({4}))) == "");
  CHECK(abi_problem(list(named("self", tensor({4}, "complex64"))), list(tensor({4}, "complex64"))) ==
        "argument 0 (self) has dtype complex64, not in the candidate ABI");
  CHECK(abi_problem(list(named("self", tensor({1, 1, 1, 1, 1, 1, 1, 1, 2}))), list(tensor({2}))) ==
        "argument 0 (self) has 9 dims (ABI max 8)");
  CHECK(abi_problem(list(tensor({4}), named("dims", value("int[]", {0, 1, 2, 3, 4, 5, 6, 7, 8}))), list(tensor({4}))) ==
        "argument 1 (dims) (int[]) has 9 entries (ABI max 8)");
  CHECK(abi_problem(list(tensor({4}), value("list", list(value("float", 1.0)))), list(tensor({4}))) ==
        "argument 1 (a list of \"float\") has no representation in the candidate ABI");
  CHECK(abi_problem(list(tensor({4}), value("list", list(value("int", 1), value("int", 2)))), list(tensor({4}))) == "");
  CHECK(abi_problem(list(tensor({4}), named("layout", value("Layout", "sparse_coo"))), list(tensor({4}))) ==
        "argument 1 (layout) (Layout) is not strided");
  CHECK(abi_problem(list(tensor({4}), named("memory_format", value("MemoryFormat", "channels_last")),
                         named("dtype", value("ScalarType", "float16")), json{{"type", "None"}}),
                    list(tensor({4}))) == "");
  CHECK(abi_problem(list(tensor({4})), list(value("float", 1.5))) ==
        "output 0 is a float, not a tensor: the candidate ABI returns tensors only");
  CHECK(abi_problem(list(tensor({4})), list(json{{"type", "None"}}, tensor({4}, "uint16"))) ==
        "output 1 has dtype uint16, not in the candidate ABI");

  auto r = inherent_reason(entry("cat", list(named("tensors", value("Tensor[]", json::array()))), list(tensor({8}))),
                           "cpu");
  REQUIRE(r);
  CHECK(r->reason == Selection::Abi);
}

TEST_SUITE_END();
}  // namespace forge
