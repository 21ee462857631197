// The strategy library's fused kernel for a chain (rules/search/chain_strategies.h):
// which chains it takes and why it refuses the others, and a generated CPU
// kernel computing a chain with a broadcast input and a Python number,
// checked element by element against the chain computed in double.
#include <doctest/doctest.h>
#include <dlfcn.h>

#include <cmath>
#include <cstring>
#include <memory>

#include "rules/evaluate/compile.h"
#include "rules/search/chain_strategies.h"
#include "runtime/abi/forge_kernel.h"
#include "tests/support.h"
#include "util/process.h"

namespace forge {
using nlohmann::json;

TEST_SUITE_BEGIN("rules::ChainStrategies");

namespace {
json tensor(std::vector<int64_t> sizes, std::string dtype = "float32", std::string device = "cpu") {
  std::vector<int64_t> strides(sizes.size(), 1);
  for (size_t d = sizes.size(); d-- > 1;) strides[d - 1] = strides[d] * sizes[d];
  return {{"type", "Tensor"}, {"dtype", dtype}, {"sizes", sizes}, {"strides", strides}, {"device", device}};
}
json input(json t, int k) {
  t["ref"] = {{"input", k}};
  return t;
}
json link(json t, int op) {
  t["ref"] = {{"op", op}, {"output", 0}};
  return t;
}
json number(double v) { return {{"type", "float"}, {"value", v}}; }

// y = relu((x * 0.5 + b) ** 2 - x), x [4, 6, 5], b [6, 1] (per "channel"), 0.5
// a Python number: mul.Tensor, add.Tensor (alpha 1), pow 2, sub (alpha 2), relu.
Target chain() {
  const json x = tensor({4, 6, 5}), b = tensor({6, 1}), half = tensor({}, "float64");
  Target t;
  t.op = "forge_chain::c_test";
  t.args = json::array({x, half, b, x});
  t.outputs = json::array({x});
  json ops = json::array();
  ops.push_back({{"op", "aten::mul"}, {"overload", "Tensor"}, {"args", {input(x, 0), input(half, 1)}}});
  ops.push_back({{"op", "aten::add"}, {"overload", "Tensor"}, {"args", {link(x, 0), input(b, 2), number(1)}}});
  ops.push_back({{"op", "aten::pow"}, {"overload", "Tensor_Scalar"}, {"args", {link(x, 1), number(2)}}});
  ops.push_back({{"op", "aten::sub"}, {"overload", "Tensor"}, {"args", {link(x, 2), input(x, 3), number(2)}}});
  ops.push_back({{"op", "aten::relu"}, {"overload", ""}, {"args", {link(x, 3)}}});
  t.chain = {{"inputs", 4}, {"ops", ops}, {"outputs", 1}};
  return t;
}
}  // namespace

TEST_CASE("a chain of table ops gets a fused kernel; every other chain says why not") {
  std::string why;
  const std::string def = chain_definition(chain(), &why);
  CAPTURE(why);
  REQUIRE_FALSE(def.empty());
  CHECK(def.find("X(1, CHAIN_F32, FORGE_FLOAT64, CHAIN_VALUE, 1, 1, 1, 1)") != std::string::npos);
  CHECK(def.find("X(2, CHAIN_F32, FORGE_FLOAT32, CHAIN_BCAST, 5, 6, 1, 1)") != std::string::npos);  // (j / 5) % 6
  CHECK(def.find("X(3, CHAIN_F32, FORGE_FLOAT32, CHAIN_FULL, 1, 120, 1, 1)") != std::string::npos);
  CHECK(def.find("pw_op_binary<PW_sub>(t2, in[3], PwScalars{static_cast<float>(2)") != std::string::npos);
  auto strategies = chain_strategies(chain()).strategies;
  REQUIRE(strategies.size() == 2);
  CHECK(strategies[0].backend == "cpu");
  CHECK(strategies[1].backend == "cuda");
  CHECK(strategies[1].text.find("FORGE_CHAIN (forge replaces") == std::string::npos);

  auto refused = [](Target t) {
    std::string why;
    CHECK(chain_definition(t, &why).empty());
    return why;
  };
  Target mean = chain();
  mean.chain["ops"][4] = {{"op", "aten::mean"}, {"overload", "dim"}, {"args", {link(tensor({4, 6, 5}), 3)}}};
  CHECK(refused(mean) == "op 4 (mean.dim) is not in the pointwise table");
  // A definition spells in-place ops as their functional ops
  // (chain_target.cpp); one spelled in place is refused, not run as another op.
  Target inplace = chain();
  inplace.chain["ops"][4]["op"] = "aten::relu_";
  CHECK(refused(inplace) == "op 4 (relu_) is an in-place op");
  Target on_input = chain();
  on_input.chain["ops"][0]["op"] = "aten::mul_";
  CHECK(refused(on_input) == "op 0 (mul_.Tensor) is an in-place op");
  Target odd_power = chain();
  odd_power.chain["ops"][2]["args"][1] = number(2.5);
  CHECK(refused(odd_power).find("exponent 2.5") != std::string::npos);
  Target strided = chain();
  strided.args[3]["strides"] = {1, 4, 24};
  CHECK(refused(strided) == "input 3 () is not contiguous");
  // Dims 0 and 2 but not 1 (a mask [batch, 1, k] beside [batch, heads, k]): two
  // runs, element ((j / 30) % 4) * 5 + j % 5.
  Target gap = chain();
  gap.args[2] = tensor({4, 1, 5});
  CHECK(chain_definition(gap, &why).find("X(2, CHAIN_F32, FORGE_FLOAT32, CHAIN_BCAST, 1, 5, 30, 4)") != std::string::npos);
  Target three = chain();  // [2, 1, 3, 1, 5] beside [2, 4, 3, 6, 5]: three runs
  for (int k : {0, 3}) three.args[k] = tensor({2, 4, 3, 6, 5});
  three.outputs[0] = tensor({2, 4, 3, 6, 5});
  three.args[2] = tensor({2, 1, 3, 1, 5});
  CHECK(refused(three) == "input 2 () broadcasts along more than two runs of dims");
  // A Python integer (x * 2) is an int64 number: read on the host too.
  Target int_number = chain();
  int_number.args[1]["dtype"] = "int64";
  CHECK(chain_definition(int_number, &why).find("X(1, CHAIN_F32, FORGE_INT64, CHAIN_VALUE, 1, 1, 1, 1)") != std::string::npos);
  // An out= variant (abs(x) on the CPU dispatches abs.out): the chain target
  // takes its buffer as an input the chain changes, which a fused kernel
  // would have to write too; refused for now.
  Target out_variant = chain();
  out_variant.chain["ops"][4]["op"] = "aten::abs";
  out_variant.chain["ops"][4]["overload"] = "out";
  CHECK(refused(out_variant) == "op 4 (abs.out) writes into an out= buffer, which the chain takes as an input it changes");
  Target two_outputs = chain();
  two_outputs.outputs.push_back(tensor({4, 6, 5}));
  CHECK(refused(two_outputs) == "the chain returns more than one tensor");
}

namespace {
using Kernel = int (*)(const forge_call*);
using Library = std::unique_ptr<void, int (*)(void*)>;

// A CPU strategy compiled with its first params and loaded: the library and its forge_kernel.
std::pair<Library, Kernel> load_cpu(const Strategy& s, const test::TempDir& tmp) {
  test::write_text(tmp / "candidate.cpp", instantiate(s, param_grid(s).front()));
  Command compile;
  compile.argv = compile_flags(CandidateLang::Cpp, "");
  for (std::string a : {(tmp / "candidate.cpp").string(), std::string("-o"), (tmp / "candidate.so").string()})
    compile.argv.push_back(a);
  compile.timeout_seconds = 120;
  const CommandResult built = make_process_runner()->run(compile);
  INFO(built.err);
  REQUIRE(built.ok());
  Library lib(dlopen((tmp / "candidate.so").c_str(), RTLD_NOW | RTLD_LOCAL), dlclose);
  REQUIRE_MESSAGE(lib, dlerror());
  void* entry = dlsym(lib.get(), "forge_kernel");
  REQUIRE(entry);
  return {std::move(lib), reinterpret_cast<Kernel>(entry)};
}

forge_tensor view(void* data, std::vector<int64_t> sizes, int32_t dtype) {
  forge_tensor t{};
  t.data = data, t.ndim = static_cast<int32_t>(sizes.size()), t.dtype = dtype;
  int64_t stride = 1;
  for (size_t d = sizes.size(); d-- > 0;) t.sizes[d] = sizes[d], t.strides[d] = stride, stride *= sizes[d];
  return t;
}
}  // namespace

TEST_CASE("the generated CPU kernel computes the chain, broadcast and Python number included") {
  test::TempDir tmp;
  auto [lib, kernel] = load_cpu(chain_strategies(chain()).strategies.at(0), tmp);

  std::vector<float> x(120), b(6), y(120, NAN);
  double half = 0.5;
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37 * static_cast<double>(i)) * 3.0;
  for (size_t c = 0; c < b.size(); ++c) b[c] = 0.25f * static_cast<float>(c) - 0.5f;
  forge_tensor in[4] = {view(x.data(), {4, 6, 5}, FORGE_FLOAT32), view(&half, {}, FORGE_FLOAT64),
                        view(b.data(), {6, 1}, FORGE_FLOAT32), view(x.data(), {4, 6, 5}, FORGE_FLOAT32)};
  forge_tensor out[1] = {view(y.data(), {4, 6, 5}, FORGE_FLOAT32)};
  forge_call call{};
  call.inputs = in, call.n_inputs = 4, call.outputs = out, call.n_outputs = 1;
  REQUIRE(kernel(&call) == 0);
  for (int64_t j = 0; j < 120; ++j) {
    const double t = static_cast<double>(x[j]) * 0.5 + b[(j / 5) % 6];
    const double want = std::max(0.0, t * t - 2.0 * x[j]);
    CAPTURE(j);
    CHECK(std::fabs(y[j] - want) <= 1e-6 * (1.0 + t * t + 2.0 * std::fabs(x[j])));  // fp32 against double
  }
  // Another call than the one generated for: the kernel declines it, also
  // where as many elements would be read (a bias [1, 6] would broadcast along
  // another dim), and an output of another shape.
  in[2] = view(b.data(), {3, 1}, FORGE_FLOAT32);
  CHECK(kernel(&call) != 0);
  in[2] = view(b.data(), {1, 6}, FORGE_FLOAT32);
  CHECK(kernel(&call) != 0);
  in[2] = view(b.data(), {6, 1}, FORGE_FLOAT32);
  out[0] = view(y.data(), {6, 4, 5}, FORGE_FLOAT32);
  CHECK(kernel(&call) != 0);
  out[0] = view(y.data(), {4, 6, 5}, FORGE_FLOAT32);
  REQUIRE(kernel(&call) == 0);
  half = 0.5;
  in[1].dtype = FORGE_FLOAT32;  // a float32 number is no Python number
  CHECK(kernel(&call) != 0);
}

TEST_CASE("maximum and minimum are table ops that keep NaN; a CUDA chain reads a CPU 0-dim tensor on the host") {
  // y = minimum(maximum(x, lo), c): lo [5] broadcast, c a 0-dim float32 tensor.
  const json x = tensor({4, 5}), lo = tensor({5}), c = tensor({});
  Target t;
  t.op = "forge_chain::c_minmax";
  t.args = json::array({x, lo, c});
  t.outputs = json::array({x});
  json ops = json::array();
  ops.push_back({{"op", "aten::maximum"}, {"overload", ""}, {"args", {input(x, 0), input(lo, 1)}}});
  ops.push_back({{"op", "aten::minimum"}, {"overload", ""}, {"args", {link(x, 0), input(c, 2)}}});
  t.chain = {{"inputs", 3}, {"ops", ops}, {"outputs", 1}};
  std::string why;
  CHECK_MESSAGE(chain_definition(t, &why).find("X(2, CHAIN_F32, FORGE_FLOAT32, CHAIN_BCAST, ") != std::string::npos, why);
  test::TempDir tmp;
  auto [lib, kernel] = load_cpu(chain_strategies(t).strategies.at(0), tmp);
  std::vector<float> xs(20), los{-1.0f, 0.0f, NAN, 0.5f, -0.25f}, y(20, 0.0f);
  float cap = 0.75f;
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>(i % 7) * 0.5f - 1.5f;
  xs[3] = NAN;
  forge_tensor in[3] = {view(xs.data(), {4, 5}, FORGE_FLOAT32), view(los.data(), {5}, FORGE_FLOAT32),
                        view(&cap, {}, FORGE_FLOAT32)};
  forge_tensor out[1] = {view(y.data(), {4, 5}, FORGE_FLOAT32)};
  forge_call call{};
  call.inputs = in, call.n_inputs = 3, call.outputs = out, call.n_outputs = 1;
  REQUIRE(kernel(&call) == 0);
  for (size_t j = 0; j < 20; ++j) {
    CAPTURE(j);
    const float l = los[j % 5];
    if (std::isnan(xs[j]) || std::isnan(l)) CHECK(std::isnan(y[j]));
    else CHECK(y[j] == std::min(std::max(xs[j], l), cap));
  }
  // On CUDA the 0-dim CPU tensor is a value read on the host (the kernel cannot read host memory).
  Target cuda = t;
  for (auto* list : {&cuda.args, &cuda.outputs})
    for (auto& a : *list) a["device"] = "cuda:0";
  cuda.args[2]["device"] = "cpu";
  CHECK_MESSAGE(chain_definition(cuda, &why).find("X(2, CHAIN_F32, FORGE_FLOAT32, CHAIN_VALUE, ") != std::string::npos, why);
}

TEST_CASE("the generated CPU kernel reads an input broadcast along two runs of dims") {
  Target t = chain();
  t.args[2] = tensor({4, 1, 5});  // as an attention mask [batch, 1, k] beside [batch, heads, k]
  test::TempDir tmp;
  auto [lib, kernel] = load_cpu(chain_strategies(t).strategies.at(0), tmp);
  std::vector<float> x(120), b(20), y(120, NAN);
  double half = 0.5;
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37 * static_cast<double>(i)) * 3.0;
  for (size_t c = 0; c < b.size(); ++c) b[c] = 0.25f * static_cast<float>(c) - 2.5f;
  forge_tensor in[4] = {view(x.data(), {4, 6, 5}, FORGE_FLOAT32), view(&half, {}, FORGE_FLOAT64),
                        view(b.data(), {4, 1, 5}, FORGE_FLOAT32), view(x.data(), {4, 6, 5}, FORGE_FLOAT32)};
  forge_tensor out[1] = {view(y.data(), {4, 6, 5}, FORGE_FLOAT32)};
  forge_call call{};
  call.inputs = in, call.n_inputs = 4, call.outputs = out, call.n_outputs = 1;
  REQUIRE(kernel(&call) == 0);
  for (int64_t j = 0; j < 120; ++j) {
    const double t = static_cast<double>(x[j]) * 0.5 + b[(j / 30) * 5 + j % 5];
    const double want = std::max(0.0, t * t - 2.0 * x[j]);
    CAPTURE(j);
    CHECK(std::fabs(y[j] - want) <= 1e-6 * (1.0 + t * t + 2.0 * std::fabs(x[j])));
  }
  in[2] = view(b.data(), {4, 5, 1}, FORGE_FLOAT32);  // as many elements, other dims: declined
  CHECK(kernel(&call) != 0);
}

// batch_norm(x, w, b, mean, var, training False, 0.1, eps) in eval mode ->
// add(residual) -> relu, x [2, 3, 4, 5]: ResNet's block tail (add_ and relu_
// there, spelled functionally in a chain's definition).
// Without `affine`, weight and bias are None (inputs: x, mean, var, residual).
Target bn_add_relu(bool affine = true) {
  const json x = tensor({2, 3, 4, 5}), c = tensor({3}), none = {{"type", "None"}};
  Target t;
  t.op = "forge_chain::c_bn";
  t.args = affine ? json::array({x, c, c, c, c, x}) : json::array({x, c, c, x});
  t.outputs = json::array({x});
  const int k = affine ? 3 : 1;  // the running mean's input
  json ops = json::array();
  ops.push_back({{"op", "aten::native_batch_norm"},
                 {"overload", ""},
                 {"args", {input(x, 0), affine ? input(c, 1) : none, affine ? input(c, 2) : none, input(c, k),
                           input(c, k + 1), {{"type", "bool"}, {"value", false}}, number(0.1), number(1e-5)}}});
  ops.push_back({{"op", "aten::add"}, {"overload", "Tensor"}, {"args", {link(x, 0), input(x, k + 2), number(1)}}});
  ops.push_back({{"op", "aten::relu"}, {"overload", ""}, {"args", {link(x, 1)}}});
  t.chain = {{"inputs", t.args.size()}, {"ops", ops}, {"outputs", 1}};
  return t;
}

TEST_CASE("a batch norm in eval mode heads a pointwise chain, its parameters read per channel") {
  std::string why;
  const std::string def = chain_definition(bn_add_relu(), &why);
  CAPTURE(why);
  REQUIRE_FALSE(def.empty());
  for (int k = 1; k <= 4; ++k)  // [3] read as [3, 1, 1]: element (j / 20) % 3
    CHECK(def.find("X(" + std::to_string(k) + ", CHAIN_F32, FORGE_FLOAT32, CHAIN_BCAST, 20, 3, 1, 1)") != std::string::npos);
  CHECK(def.find("pw_batch_norm_eval(in[0], in[1], in[2], in[3], in[4], static_cast<float>(") != std::string::npos);

  auto refused = [](Target t) {
    std::string why;
    CHECK(chain_definition(t, &why).empty());
    return why;
  };
  Target training = bn_add_relu();
  training.chain["ops"][0]["args"][5]["value"] = true;
  CHECK(refused(training) == "op 0 (native_batch_norm) is in training mode (it updates the running statistics)");
  CHECK(chain_definition(bn_add_relu(/*affine=*/false), &why)  // weight and bias None: 1 and 0
            .find("pw_batch_norm_eval(in[0], pw_k(1.0f), pw_k(0.0f), in[1], in[2], ") != std::string::npos);
  Target per_row = bn_add_relu();  // a parameter of another size than the channels
  per_row.args[2] = tensor({5});
  per_row.chain["ops"][0]["args"][2] = input(tensor({5}), 2);
  CHECK(refused(per_row) == "input 2 (a norm's parameter) is not one value per channel");

  // The CPU kernel against double: (x - mean) / sqrt(var + eps) * w + b + r, then ReLU.
  test::TempDir tmp;
  auto [lib, kernel] = load_cpu(chain_strategies(bn_add_relu()).strategies.at(0), tmp);
  std::vector<float> x(120), r(120), y(120, NAN), w{0.5f, 1.5f, -2.0f}, b{0.25f, -1.0f, 3.0f}, m{0.1f, -0.3f, 2.0f},
      v{0.5f, 2.0f, 0.01f};
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)) * 3.0);
    r[i] = static_cast<float>(std::cos(0.11 * static_cast<double>(i)));
  }
  forge_tensor in[6] = {view(x.data(), {2, 3, 4, 5}, FORGE_FLOAT32), view(w.data(), {3}, FORGE_FLOAT32),
                        view(b.data(), {3}, FORGE_FLOAT32),          view(m.data(), {3}, FORGE_FLOAT32),
                        view(v.data(), {3}, FORGE_FLOAT32),          view(r.data(), {2, 3, 4, 5}, FORGE_FLOAT32)};
  forge_tensor out[1] = {view(y.data(), {2, 3, 4, 5}, FORGE_FLOAT32)};
  forge_call call{};
  call.inputs = in, call.n_inputs = 6, call.outputs = out, call.n_outputs = 1;
  REQUIRE(kernel(&call) == 0);
  for (int64_t j = 0; j < 120; ++j) {
    const size_t c = static_cast<size_t>((j / 20) % 3);
    const double bn = (x[j] - m[c]) / std::sqrt(static_cast<double>(v[c]) + 1e-5) * w[c] + b[c];
    const double want = std::max(0.0, bn + r[j]);
    CAPTURE(j);
    CHECK(std::fabs(y[j] - want) <= 1e-5 * (1.0 + std::fabs(bn)));
  }
  in[1] = view(w.data(), {1, 3, 1, 1}, FORGE_FLOAT32);  // the same three values as [1, 3, 1, 1]: declined
  CHECK(kernel(&call) != 0);
}

// group_norm(x, w, b, N 2, C 8, HxW 15, G 4, eps) -> SiLU: a group norm head.
Target gn_silu() {
  const json x = tensor({2, 8, 3, 5}), w = tensor({8});
  Target t;
  t.op = "forge_chain::c_gn";
  t.args = json::array({x, w, w});
  t.outputs = json::array({x});
  json ops = json::array();
  ops.push_back({{"op", "aten::native_group_norm"},
                 {"overload", ""},
                 {"args", {input(x, 0), input(w, 1), input(w, 2), {{"type", "int"}, {"value", 2}},
                           {{"type", "int"}, {"value", 8}}, {{"type", "int"}, {"value", 15}},
                           {{"type", "int"}, {"value", 4}}, number(1e-5)}}});
  ops.push_back({{"op", "aten::silu"}, {"overload", ""}, {"args", {link(x, 0)}}});
  t.chain = {{"inputs", 3}, {"ops", ops}, {"outputs", 1}};
  return t;
}

TEST_CASE("a group norm followed by pointwise ops runs in the group_norm templates, the rest as their epilogue") {
  std::string why;
  const std::string def = head_definition(gn_silu(), &why);
  CAPTURE(why);
  REQUIRE_FALSE(def.empty());
  CHECK(def.find("#define CHAIN_GN_HW 15LL") != std::string::npos);
  CHECK(def.find("pw_op_unary<PW_silu>(t0,") != std::string::npos);
  const auto strategies = chain_strategies(gn_silu()).strategies;
  std::vector<std::string> names;
  for (const auto& s : strategies) names.push_back(s.backend + ":" + s.name);
  CHECK(names == std::vector<std::string>{"cpu:group_norm_two_pass", "cpu:group_norm_one_read",
                                          "cuda:group_norm_warp_group", "cuda:group_norm_block_group",
                                          "cuda:group_norm_split_group"});
  // Each CPU template, against group norm then SiLU in double.
  std::vector<float> x(240), w(8), b(8);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)) * 3.0 + 1.0);
  for (size_t c = 0; c < 8; ++c) w[c] = 0.5f + 0.125f * static_cast<float>(c), b[c] = 0.25f * static_cast<float>(c) - 1.0f;
  std::vector<double> want(240);
  for (int n = 0; n < 2; ++n)
    for (int g = 0; g < 4; ++g) {
      const int off = (n * 8 + g * 2) * 15;
      double mean = 0, var = 0;
      for (int i = 0; i < 30; ++i) mean += x[static_cast<size_t>(off + i)] / 30.0;
      for (int i = 0; i < 30; ++i) var += (x[static_cast<size_t>(off + i)] - mean) * (x[static_cast<size_t>(off + i)] - mean) / 30.0;
      for (int i = 0; i < 30; ++i) {
        const int c = g * 2 + i / 15;
        const double v = (x[static_cast<size_t>(off + i)] - mean) / std::sqrt(var + 1e-5) * w[static_cast<size_t>(c)] + b[static_cast<size_t>(c)];
        want[static_cast<size_t>(off + i)] = v / (1.0 + std::exp(-v));
      }
    }
  for (const auto& s : strategies) {
    if (s.backend != "cpu") continue;
    CAPTURE(s.name);
    test::TempDir tmp;
    auto [lib, kernel] = load_cpu(s, tmp);
    std::vector<float> y(240, NAN);
    forge_tensor in[3] = {view(x.data(), {2, 8, 3, 5}, FORGE_FLOAT32), view(w.data(), {8}, FORGE_FLOAT32),
                          view(b.data(), {8}, FORGE_FLOAT32)};
    forge_tensor out[1] = {view(y.data(), {2, 8, 3, 5}, FORGE_FLOAT32)};
    forge_call call{};
    call.inputs = in, call.n_inputs = 3, call.outputs = out, call.n_outputs = 1;
    REQUIRE(kernel(&call) == 0);
    for (size_t j = 0; j < 240; ++j) {
      CAPTURE(j);
      CHECK(std::fabs(y[j] - want[j]) <= 1e-5 * (1.0 + std::fabs(want[j])));
    }
    out[0] = view(y.data(), {2, 8, 15}, FORGE_FLOAT32);  // another shape: declined
    CHECK(kernel(&call) != 0);
  }
  // Refused: an op after the norm that reads another tensor, a norm without weight.
  Target add = gn_silu();
  add.args.push_back(tensor({2, 8, 3, 5}));
  add.chain["ops"][1] = {{"op", "aten::add"}, {"overload", "Tensor"},
                         {"args", {link(tensor({2, 8, 3, 5}), 0), input(tensor({2, 8, 3, 5}), 3), number(1)}}};
  CHECK(head_definition(add, &why).empty());
  Target plain = gn_silu();
  plain.chain["ops"][0]["args"][1] = {{"type", "None"}};
  CHECK(head_definition(plain, &why).empty());
  CHECK(why.find("weight is not the chain's input 1") != std::string::npos);
}

// add(x, bias per channel) -> sigmoid -> group_norm(w, b, G 4, eps) -> mul(0.5, a
// Python number): KernelBench level 2's conv -> add -> sigmoid -> GroupNorm
// tail, on x of `sizes` ([N, 8, ...]; HxW the product of the rest).
Target add_sigmoid_gn(std::vector<int64_t> sizes) {
  const json x = tensor(sizes), w = tensor({8}), half = tensor({}, "float64");
  std::vector<int64_t> per_channel(sizes.size() - 1, 1);
  per_channel[0] = 8;
  const json bias = tensor(per_channel);
  int64_t hw = 1;
  for (size_t d = 2; d < sizes.size(); ++d) hw *= sizes[d];
  Target t;
  t.op = "forge_chain::c_gnp";
  t.args = json::array({x, bias, w, w, half});
  t.outputs = json::array({x});
  json ops = json::array();
  ops.push_back({{"op", "aten::add"}, {"overload", "Tensor"}, {"args", {input(x, 0), input(bias, 1), number(1)}}});
  ops.push_back({{"op", "aten::sigmoid"}, {"overload", ""}, {"args", {link(x, 0)}}});
  ops.push_back({{"op", "aten::native_group_norm"},
                 {"overload", ""},
                 {"args", {link(x, 1), input(w, 2), input(w, 3), {{"type", "int"}, {"value", sizes[0]}},
                           {{"type", "int"}, {"value", 8}}, {{"type", "int"}, {"value", hw}},
                           {{"type", "int"}, {"value", 4}}, number(1e-5)}}});
  ops.push_back({{"op", "aten::mul"}, {"overload", "Tensor"}, {"args", {link(x, 2), input(half, 4)}}});
  t.chain = {{"inputs", 5}, {"ops", ops}, {"outputs", 1}};
  return t;
}

TEST_CASE("pointwise ops before a group norm run as its prologue, those after it as its finish") {
  for (const auto& sizes : {std::vector<int64_t>{2, 8, 3, 5}, std::vector<int64_t>{6, 8}}) {
    CAPTURE(sizes.size());
    const Target t = add_sigmoid_gn(sizes);
    std::string why;
    const std::string def = norm_definition(t, &why);
    CAPTURE(why);
    REQUIRE_FALSE(def.empty());
    CHECK(def.find("#define CHAIN_GN_W 2 ") != std::string::npos);
    const auto strategies = chain_strategies(t).strategies;
    std::vector<std::string> names;
    for (const auto& s : strategies) names.push_back(s.backend + ":" + s.name);
    CHECK(names == std::vector<std::string>{"cpu:group_norm_prologue", "cuda:group_norm_prologue"});
    const int64_t N = sizes[0], HW = sizes.size() > 2 ? sizes[2] * sizes[3] : 1, numel = N * 8 * HW;
    std::vector<float> x(static_cast<size_t>(numel)), bias(8), w(8), b(8), y(x.size(), NAN);
    double half = 0.5;
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)) * 3.0 + 1.0);
    for (size_t c = 0; c < 8; ++c)
      bias[c] = 0.3f * static_cast<float>(c) - 1.0f, w[c] = 0.5f + 0.125f * static_cast<float>(c),
      b[c] = 0.25f * static_cast<float>(c) - 1.0f;
    // In double: v = sigmoid(x + bias[c]); group norm over (n, g) slices of 2 channels; times 0.5.
    std::vector<double> v(x.size()), want(x.size());
    for (int64_t j = 0; j < numel; ++j) v[static_cast<size_t>(j)] = 1.0 / (1.0 + std::exp(-(x[static_cast<size_t>(j)] + bias[static_cast<size_t>((j / HW) % 8)])));
    const int64_t slice = 2 * HW;
    for (int64_t s0 = 0; s0 < numel; s0 += slice) {
      double mean = 0, var = 0;
      for (int64_t i = 0; i < slice; ++i) mean += v[static_cast<size_t>(s0 + i)] / static_cast<double>(slice);
      for (int64_t i = 0; i < slice; ++i) var += std::pow(v[static_cast<size_t>(s0 + i)] - mean, 2) / static_cast<double>(slice);
      for (int64_t i = 0; i < slice; ++i) {
        const size_t j = static_cast<size_t>(s0 + i), c = static_cast<size_t>(((s0 + i) / HW) % 8);
        want[j] = ((v[j] - mean) / std::sqrt(var + 1e-5) * w[c] + b[c]) * 0.5;
      }
    }
    test::TempDir tmp;
    auto [lib, kernel] = load_cpu(strategies.at(0), tmp);
    std::vector<int64_t> bias_sizes(sizes.size() - 1, 1);
    bias_sizes[0] = 8;
    forge_tensor in[5] = {view(x.data(), sizes, FORGE_FLOAT32), view(bias.data(), bias_sizes, FORGE_FLOAT32),
                          view(w.data(), {8}, FORGE_FLOAT32), view(b.data(), {8}, FORGE_FLOAT32),
                          view(&half, {}, FORGE_FLOAT64)};
    forge_tensor out[1] = {view(y.data(), sizes, FORGE_FLOAT32)};
    forge_call call{};
    call.inputs = in, call.n_inputs = 5, call.outputs = out, call.n_outputs = 1;
    REQUIRE(kernel(&call) == 0);
    for (size_t j = 0; j < y.size(); ++j) {
      CAPTURE(j);
      CHECK(std::fabs(y[j] - want[j]) <= 2e-5 * (1.0 + std::fabs(want[j])));
    }
    in[2] = view(w.data(), {4}, FORGE_FLOAT32);  // another weight size: declined
    CHECK(kernel(&call) != 0);
  }
  // Refused: the norm reads a tensor from outside instead of the op before it.
  Target outside = add_sigmoid_gn({2, 8, 3, 5});
  outside.chain["ops"][2]["args"][0] = input(tensor({2, 8, 3, 5}), 0);
  std::string why;
  CHECK(norm_definition(outside, &why).empty());
  CHECK(why == "op 2 (native_group_norm) does not read the op before it");
  CHECK(chain_strategies(outside).why == why);
}

// A post-norm transformer's residual add -> LayerNorm -> GELU (BERT's
// LayerNorm(x + sublayer(x))): x, h [2, 5, 6, 8], normalized over the last
// `dims` dims, weight and bias [*normalized_shape], eps 1e-12.
Target add_layer_norm(int dims) {
  const std::vector<int64_t> sizes = {2, 5, 6, 8};
  const std::vector<int64_t> norm(sizes.end() - dims, sizes.end());
  const json x = tensor(sizes), w = tensor(norm);
  json shape = json::array();
  for (auto v : norm) shape.push_back(v);
  Target t;
  t.op = "forge_chain::c_aln";
  t.args = json::array({x, x, w, w});
  t.outputs = json::array({x});
  json ops = json::array();
  ops.push_back({{"op", "aten::add"}, {"overload", "Tensor"}, {"args", {input(x, 0), input(x, 1), number(1)}}});
  ops.push_back({{"op", "aten::native_layer_norm"},
                 {"overload", ""},
                 {"args", {link(x, 0), {{"type", "int[]"}, {"value", shape}}, input(w, 2), input(w, 3), number(1e-12)}}});
  ops.push_back({{"op", "aten::gelu"}, {"overload", ""}, {"args", {link(x, 1), {{"type", "str"}, {"value", "none"}}}}});
  t.chain = {{"inputs", 4}, {"ops", ops}, {"outputs", 1}};
  return t;
}

TEST_CASE("a residual add before a layer norm runs in group_norm_prologue, the norm's rows as one group") {
  for (int dims : {1, 2}) {
    CAPTURE(dims);
    const Target t = add_layer_norm(dims);
    std::string why;
    const std::string def = norm_definition(t, &why);
    CAPTURE(why);
    REQUIRE_FALSE(def.empty());
    const int64_t row = dims == 1 ? 8 : 48, numel = 2 * 5 * 6 * 8;
    CHECK(def.find("#define CHAIN_GN_C " + std::to_string(row) + "LL") != std::string::npos);
    CHECK(def.find("#define CHAIN_GN_G 1LL") != std::string::npos);
    const auto strategies = chain_strategies(t).strategies;
    std::vector<std::string> names;
    for (const auto& s : strategies) names.push_back(s.backend + ":" + s.name);
    CHECK(names == std::vector<std::string>{"cpu:group_norm_prologue", "cuda:group_norm_prologue"});
    std::vector<float> x(static_cast<size_t>(numel)), h(x.size()), w(static_cast<size_t>(row)), b(w.size()),
        y(x.size(), NAN);
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)) * 3.0 + 1.0),
      h[i] = static_cast<float>(std::cos(0.11 * static_cast<double>(i)));
    for (size_t c = 0; c < w.size(); ++c)
      w[c] = 0.5f + 0.125f * static_cast<float>(c % 7), b[c] = 0.25f * static_cast<float>(c % 5) - 0.5f;
    // In double: v = x + h; each row of `row` elements normalized; * w + b; exact GELU.
    std::vector<double> want(x.size());
    for (int64_t r0 = 0; r0 < numel; r0 += row) {
      double mean = 0, var = 0;
      for (int64_t i = 0; i < row; ++i) mean += (double{x[static_cast<size_t>(r0 + i)]} + h[static_cast<size_t>(r0 + i)]) / static_cast<double>(row);
      for (int64_t i = 0; i < row; ++i)
        var += std::pow(double{x[static_cast<size_t>(r0 + i)]} + h[static_cast<size_t>(r0 + i)] - mean, 2) / static_cast<double>(row);
      for (int64_t i = 0; i < row; ++i) {
        const size_t j = static_cast<size_t>(r0 + i);
        const double n = (double{x[j]} + h[j] - mean) / std::sqrt(var + 1e-12) * w[static_cast<size_t>(i)] + b[static_cast<size_t>(i)];
        want[j] = 0.5 * n * (1.0 + std::erf(n / std::sqrt(2.0)));
      }
    }
    test::TempDir tmp;
    auto [lib, kernel] = load_cpu(strategies.at(0), tmp);
    const std::vector<int64_t> sizes = {2, 5, 6, 8}, norm(sizes.end() - dims, sizes.end());
    forge_tensor in[4] = {view(x.data(), sizes, FORGE_FLOAT32), view(h.data(), sizes, FORGE_FLOAT32),
                          view(w.data(), norm, FORGE_FLOAT32), view(b.data(), norm, FORGE_FLOAT32)};
    forge_tensor out[1] = {view(y.data(), sizes, FORGE_FLOAT32)};
    forge_call call{};
    call.inputs = in, call.n_inputs = 4, call.outputs = out, call.n_outputs = 1;
    REQUIRE(kernel(&call) == 0);
    for (size_t j = 0; j < y.size(); ++j) {
      CAPTURE(j);
      CHECK(std::fabs(y[j] - want[j]) <= 2e-5 * (1.0 + std::fabs(want[j])));
    }
  }
  // Refused: a normalized_shape that is not the output's trailing sizes.
  Target wrong = add_layer_norm(1);
  wrong.chain["ops"][1]["args"][1]["value"] = json::array({6});
  std::string why;
  CHECK(norm_definition(wrong, &why).empty());
  CHECK(why == "op 1 (native_layer_norm)'s normalized_shape is not the output's trailing sizes");
}

// GroupNorm first, then ops reading other tensors (KernelBench level 2's
// 83: GroupNorm -> minimum(x, a 0-dim tensor) -> ...; 88: ... -> x * a
// per-channel weight): x [2, 8, 3, 5], 4 groups, then minimum(., m) and
// mul(., s[8, 1, 1]).
TEST_CASE("a group norm first whose later ops read other tensors runs in group_norm_prologue, not a head template") {
  const json x = tensor({2, 8, 3, 5}), w = tensor({8}), m = tensor({}), sc = tensor({8, 1, 1});
  Target t;
  t.op = "forge_chain::c_gnm";
  t.args = json::array({x, w, w, m, sc});
  t.outputs = json::array({x});
  json ops = json::array();
  ops.push_back({{"op", "aten::native_group_norm"},
                 {"overload", ""},
                 {"args", {input(x, 0), input(w, 1), input(w, 2), {{"type", "int"}, {"value", 2}},
                           {{"type", "int"}, {"value", 8}}, {{"type", "int"}, {"value", 15}},
                           {{"type", "int"}, {"value", 4}}, number(1e-5)}}});
  ops.push_back({{"op", "aten::minimum"}, {"overload", ""}, {"args", {link(x, 0), input(m, 3)}}});
  ops.push_back({{"op", "aten::mul"}, {"overload", "Tensor"}, {"args", {link(x, 1), input(sc, 4)}}});
  t.chain = {{"inputs", 5}, {"ops", ops}, {"outputs", 1}};
  std::string why;
  CHECK(head_definition(t, &why).empty());  // its epilogue reads no tensor from outside the chain
  const auto got = chain_strategies(t);
  CAPTURE(got.why);
  std::vector<std::string> names;
  for (const auto& s : got.strategies) names.push_back(s.backend + ":" + s.name);
  REQUIRE(names == std::vector<std::string>{"cpu:group_norm_prologue", "cuda:group_norm_prologue"});
  std::vector<float> xv(240), wv(8), bv(8), sv(8), y(240, NAN);
  float mv = 0.75f;
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)) * 3.0 + 1.0);
  for (size_t c = 0; c < 8; ++c)
    wv[c] = 0.5f + 0.125f * static_cast<float>(c), bv[c] = 0.25f * static_cast<float>(c) - 1.0f,
    sv[c] = 1.5f - 0.25f * static_cast<float>(c);
  std::vector<double> want(240);
  for (int s0 = 0; s0 < 240; s0 += 30) {
    double mean = 0, var = 0;
    for (int i = 0; i < 30; ++i) mean += xv[static_cast<size_t>(s0 + i)] / 30.0;
    for (int i = 0; i < 30; ++i) var += std::pow(xv[static_cast<size_t>(s0 + i)] - mean, 2) / 30.0;
    for (int i = 0; i < 30; ++i) {
      const size_t j = static_cast<size_t>(s0 + i), c = (j / 15) % 8;
      want[j] = std::min((xv[j] - mean) / std::sqrt(var + 1e-5) * wv[c] + bv[c], static_cast<double>(mv)) * sv[c];
    }
  }
  test::TempDir tmp;
  auto [lib, kernel] = load_cpu(got.strategies.at(0), tmp);
  forge_tensor in[5] = {view(xv.data(), {2, 8, 3, 5}, FORGE_FLOAT32), view(wv.data(), {8}, FORGE_FLOAT32),
                        view(bv.data(), {8}, FORGE_FLOAT32), view(&mv, {}, FORGE_FLOAT32),
                        view(sv.data(), {8, 1, 1}, FORGE_FLOAT32)};
  forge_tensor out[1] = {view(y.data(), {2, 8, 3, 5}, FORGE_FLOAT32)};
  forge_call call{};
  call.inputs = in, call.n_inputs = 5, call.outputs = out, call.n_outputs = 1;
  REQUIRE(kernel(&call) == 0);
  for (size_t j = 0; j < y.size(); ++j) {
    CAPTURE(j);
    CHECK(std::fabs(y[j] - want[j]) <= 2e-5 * (1.0 + std::fabs(want[j])));
  }
}

// Hugging Face's float32 RMSNorm as ops: x [3, 8, 64] (read by pow and by
// mul: one input), eps a Python number, weight [64].
Target rms() {
  const json x = tensor({3, 8, 64}), row = tensor({3, 8, 1}), eps = tensor({}, "float64"), w = tensor({64});
  Target t;
  t.op = "forge_chain::c_rms";
  t.args = json::array({x, eps, w});
  t.outputs = json::array({x});
  json ops = json::array();
  ops.push_back({{"op", "aten::pow"}, {"overload", "Tensor_Scalar"}, {"args", {input(x, 0), number(2)}}});
  const json dims = {{"type", "list"}, {"value", json::array({json{{"type", "int"}, {"value", -1}}})}};
  const json keepdim = {{"type", "bool"}, {"value", true}}, none = {{"type", "None"}};
  ops.push_back({{"op", "aten::mean"}, {"overload", "dim"}, {"args", json::array({link(x, 0), dims, keepdim, none})}});
  ops.push_back({{"op", "aten::add"}, {"overload", "Tensor"}, {"args", {link(row, 1), input(eps, 1), number(1)}}});
  ops.push_back({{"op", "aten::rsqrt"}, {"overload", ""}, {"args", {link(row, 2)}}});
  ops.push_back({{"op", "aten::mul"}, {"overload", "Tensor"}, {"args", {input(x, 0), link(row, 3)}}});
  ops.push_back({{"op", "aten::mul"}, {"overload", "Tensor"}, {"args", {input(w, 2), link(x, 4)}}});
  t.chain = {{"inputs", 3}, {"ops", ops}, {"outputs", 1}};
  return t;
}

TEST_CASE("an RMSNorm spelled as ops runs in the rms_norm templates") {
  std::string why;
  int64_t row = 0;
  CAPTURE(why);
  REQUIRE_FALSE(rms_definition(rms(), &row, &why).empty());
  CHECK(row == 64);
  const auto strategies = chain_strategies(rms()).strategies;
  std::vector<std::string> names;
  for (const auto& s : strategies) names.push_back(s.backend + ":" + s.name);
  CHECK(names == std::vector<std::string>{"cpu:rms_norm_rows", "cuda:rms_norm_warp_rows"});
  std::vector<float> x(3 * 8 * 64), w(64), y(x.size(), NAN);
  double eps = 1e-6;
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)) * 2.0);
  for (size_t c = 0; c < w.size(); ++c) w[c] = 0.5f + 0.01f * static_cast<float>(c);
  test::TempDir tmp;
  auto [lib, kernel] = load_cpu(strategies.at(0), tmp);
  forge_tensor in[3] = {view(x.data(), {3, 8, 64}, FORGE_FLOAT32), view(&eps, {}, FORGE_FLOAT64),
                        view(w.data(), {64}, FORGE_FLOAT32)};
  forge_tensor out[1] = {view(y.data(), {3, 8, 64}, FORGE_FLOAT32)};
  forge_call call{};
  call.inputs = in, call.n_inputs = 3, call.outputs = out, call.n_outputs = 1;
  REQUIRE(kernel(&call) == 0);
  for (size_t r = 0; r < 24; ++r) {
    double ms = 0;
    for (size_t j = 0; j < 64; ++j) ms += static_cast<double>(x[r * 64 + j]) * x[r * 64 + j] / 64.0;
    for (size_t j = 0; j < 64; ++j) {
      const double want = w[j] * (x[r * 64 + j] / std::sqrt(ms + eps));
      CAPTURE(r * 64 + j);
      CHECK(std::fabs(y[r * 64 + j] - want) <= 1e-5 * (1.0 + std::fabs(want)));
    }
  }
  // A row of another length: declined.
  in[0] = view(x.data(), {3, 16, 32}, FORGE_FLOAT32);
  out[0] = view(y.data(), {3, 16, 32}, FORGE_FLOAT32);
  CHECK(kernel(&call) != 0);
  // Refused: x's two reads two inputs (they were not shown to be one tensor).
  Target four = rms();
  four.args.push_back(four.args[0]);
  four.chain["ops"][4]["args"][0]["ref"] = {{"input", 3}};
  CHECK(rms_definition(four, &row, &why).empty());
  CHECK(why.find("on 4 inputs") != std::string::npos);
  // Refused: the mean over another dim.
  Target other = rms();
  other.chain["ops"][1]["args"][1]["value"][0]["value"] = 1;
  CHECK(rms_definition(other, &row, &why).empty());
}

// KernelBench's RMSNorm, x / sqrt(mean(x^2, dim 1, keepdim) + eps), on
// x [3, 5, 4, 6]: the reduction over a middle dim (columns of 24 positions).
Target reduce_columns() {
  const json x = tensor({3, 5, 4, 6}), r = tensor({3, 1, 4, 6}), eps = tensor({}, "float64");
  Target t;
  t.op = "forge_chain::c_red";
  t.args = json::array({x, eps});
  t.outputs = json::array({x});
  json ops = json::array();
  ops.push_back({{"op", "aten::pow"}, {"overload", "Tensor_Scalar"}, {"args", {input(x, 0), {{"type", "int"}, {"value", 2}}}}});
  const json dims = {{"type", "list"}, {"value", json::array({json{{"type", "int"}, {"value", 1}}})}};
  const json keepdim = {{"type", "bool"}, {"value", true}}, none = {{"type", "None"}};
  ops.push_back({{"op", "aten::mean"}, {"overload", "dim"}, {"args", json::array({link(x, 0), dims, keepdim, none})}});
  ops.push_back({{"op", "aten::add"}, {"overload", "Tensor"}, {"args", {link(r, 1), input(eps, 1), number(1)}}});
  ops.push_back({{"op", "aten::sqrt"}, {"overload", ""}, {"args", {link(r, 2)}}});
  ops.push_back({{"op", "aten::div"}, {"overload", "Tensor"}, {"args", {input(x, 0), link(r, 3)}}});
  t.chain = {{"inputs", 2}, {"ops", ops}, {"outputs", 1}};
  return t;
}

// KernelBench's L2 norm, x / norm(x, 2, dim 1, keepdim), on rows: x [4, 37].
Target reduce_rows() {
  const json x = tensor({4, 37}), r = tensor({4, 1});
  Target t;
  t.op = "forge_chain::c_l2";
  t.args = json::array({x});
  t.outputs = json::array({x});
  json ops = json::array();
  const json dims = {{"type", "list"}, {"value", json::array({json{{"type", "int"}, {"value", 1}}})}};
  const json keepdim = {{"type", "bool"}, {"value", true}}, none = {{"type", "None"}};
  ops.push_back({{"op", "aten::linalg_vector_norm"}, {"overload", ""},
                 {"args", json::array({input(x, 0), {{"type", "int"}, {"value", 2}}, dims, keepdim, none})}});
  ops.push_back({{"op", "aten::div"}, {"overload", "Tensor"}, {"args", {input(x, 0), link(r, 0)}}});
  t.chain = {{"inputs", 1}, {"ops", ops}, {"outputs", 1}};
  return t;
}

TEST_CASE("a reduction over one dim among pointwise ops runs in the reduce_pointwise templates, rows and columns") {
  test::TempDir tmp;
  std::vector<float> x(3 * 5 * 4 * 6), y(x.size(), NAN);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)) * 2.0);
  {
    const auto strategies = chain_strategies(reduce_columns()).strategies;
    std::vector<std::string> names;
    for (const auto& s : strategies) names.push_back(s.backend + ":" + s.name);
    REQUIRE(names == std::vector<std::string>{"cpu:reduce_pointwise", "cuda:reduce_pointwise"});
    auto [lib, kernel] = load_cpu(strategies.at(0), tmp);
    double eps = 1e-5;
    forge_tensor in[2] = {view(x.data(), {3, 5, 4, 6}, FORGE_FLOAT32), view(&eps, {}, FORGE_FLOAT64)};
    forge_tensor out[1] = {view(y.data(), {3, 5, 4, 6}, FORGE_FLOAT32)};
    forge_call call{};
    call.inputs = in, call.n_inputs = 2, call.outputs = out, call.n_outputs = 1;
    REQUIRE(kernel(&call) == 0);
    for (size_t o = 0; o < 3; ++o)
      for (size_t p = 0; p < 24; ++p) {
        double ms = 0;
        for (size_t k = 0; k < 5; ++k) ms += std::pow(static_cast<double>(x[(o * 5 + k) * 24 + p]), 2) / 5.0;
        for (size_t k = 0; k < 5; ++k) {
          const size_t j = (o * 5 + k) * 24 + p;
          const double want = x[j] / std::sqrt(ms + eps);
          CAPTURE(j);
          CHECK(std::fabs(y[j] - want) <= 1e-5 * (1.0 + std::fabs(want)));
        }
      }
    out[0] = view(y.data(), {3, 5, 24}, FORGE_FLOAT32);  // another shape: declined
    CHECK(kernel(&call) != 0);
  }
  {
    const auto strategies = chain_strategies(reduce_rows()).strategies;
    REQUIRE(strategies.size() == 2);
    auto [lib, kernel] = load_cpu(strategies.at(0), tmp);
    forge_tensor in[1] = {view(x.data(), {4, 37}, FORGE_FLOAT32)};
    forge_tensor out[1] = {view(y.data(), {4, 37}, FORGE_FLOAT32)};
    forge_call call{};
    call.inputs = in, call.n_inputs = 1, call.outputs = out, call.n_outputs = 1;
    REQUIRE(kernel(&call) == 0);
    for (size_t r = 0; r < 4; ++r) {
      double ss = 0;
      for (size_t k = 0; k < 37; ++k) ss += static_cast<double>(x[r * 37 + k]) * x[r * 37 + k];
      for (size_t k = 0; k < 37; ++k) {
        const double want = x[r * 37 + k] / std::sqrt(ss);
        CAPTURE(r * 37 + k);
        CHECK(std::fabs(y[r * 37 + k] - want) <= 1e-5 * (1.0 + std::fabs(want)));
      }
    }
  }
  // Refused, each saying why: keepdim False, two dims, the 1-norm.
  std::string why;
  Target t = reduce_columns();
  t.chain["ops"][1]["args"][2]["value"] = false;
  CHECK(reduce_definition(t, &why).empty());
  CHECK(why.find("keepdim is not True") != std::string::npos);
  t = reduce_columns();
  t.chain["ops"][1]["args"][1]["value"].push_back(json{{"type", "int"}, {"value", 2}});
  CHECK(reduce_definition(t, &why).empty());
  CHECK(why.find("not over one dim") != std::string::npos);
  t = reduce_rows();
  t.chain["ops"][0]["args"][1]["value"] = 1;
  CHECK(reduce_definition(t, &why).empty());
  CHECK(why.find("not the 2-norm") != std::string::npos);
  CHECK(chain_strategies(t).why.find("not the 2-norm") != std::string::npos);
}

// Hugging Face's LlamaRMSNorm on a bf16 model: x.float(), pow, mean, add eps,
// rsqrt, mul, .to(bf16), mul by the bf16 weight; x [6, 40].
TEST_CASE("a bf16 RMSNorm with its casts runs in the reduce_pointwise template, rounding where the casts do") {
  const json xb = tensor({6, 40}, "bfloat16"), xf = tensor({6, 40}), r = tensor({6, 1}), eps = tensor({}, "float64"),
             w = tensor({40}, "bfloat16");
  Target t;
  t.op = "forge_chain::c_llama";
  t.args = json::array({xb, eps, w});
  t.outputs = json::array({xb});
  const json dims = {{"type", "list"}, {"value", json::array({json{{"type", "int"}, {"value", -1}}})}};
  const json keepdim = {{"type", "bool"}, {"value", true}}, none = {{"type", "None"}};
  auto to = [](const char* dtype) { return json{{"name", "dtype"}, {"type", "ScalarType"}, {"value", dtype}}; };
  json ops = json::array();
  ops.push_back({{"op", "aten::_to_copy"}, {"overload", ""}, {"args", {input(xb, 0), to("float32")}}});
  ops.push_back({{"op", "aten::pow"}, {"overload", "Tensor_Scalar"}, {"args", {link(xf, 0), number(2)}}});
  ops.push_back({{"op", "aten::mean"}, {"overload", "dim"}, {"args", json::array({link(xf, 1), dims, keepdim, none})}});
  ops.push_back({{"op", "aten::add"}, {"overload", "Tensor"}, {"args", {link(r, 2), input(eps, 1), number(1)}}});
  ops.push_back({{"op", "aten::rsqrt"}, {"overload", ""}, {"args", {link(r, 3)}}});
  ops.push_back({{"op", "aten::mul"}, {"overload", "Tensor"}, {"args", {link(xf, 0), link(r, 4)}}});
  ops.push_back({{"op", "aten::_to_copy"}, {"overload", ""}, {"args", {link(xf, 5), to("bfloat16")}}});
  ops.push_back({{"op", "aten::mul"}, {"overload", "Tensor"}, {"args", {input(w, 2), link(xb, 6)}}});
  t.chain = {{"inputs", 3}, {"ops", ops}, {"outputs", 1}};
  const auto strategies = chain_strategies(t);
  REQUIRE_MESSAGE(strategies.strategies.size() == 2, strategies.why);
  CHECK(strategies.strategies[0].name == "reduce_pointwise");
  auto bf16 = [](float v) {  // round to nearest even, as torch does
    uint32_t u;
    std::memcpy(&u, &v, 4);
    return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  };
  auto f32 = [](uint16_t h) {
    const uint32_t u = static_cast<uint32_t>(h) << 16;
    float v;
    std::memcpy(&v, &u, 4);
    return v;
  };
  std::vector<uint16_t> x(6 * 40), wv(40), y(x.size(), 0);
  for (size_t i = 0; i < x.size(); ++i) x[i] = bf16(static_cast<float>(std::sin(0.37 * static_cast<double>(i)) * 2.0));
  for (size_t c = 0; c < wv.size(); ++c) wv[c] = bf16(0.5f + 0.013f * static_cast<float>(c));
  double e = 1e-6;
  test::TempDir tmp;
  auto [lib, kernel] = load_cpu(strategies.strategies[0], tmp);
  forge_tensor in[3] = {view(x.data(), {6, 40}, FORGE_BFLOAT16), view(&e, {}, FORGE_FLOAT64),
                        view(wv.data(), {40}, FORGE_BFLOAT16)};
  forge_tensor out[1] = {view(y.data(), {6, 40}, FORGE_BFLOAT16)};
  forge_call call{};
  call.inputs = in, call.n_inputs = 3, call.outputs = out, call.n_outputs = 1;
  REQUIRE(kernel(&call) == 0);
  int off_by_more = 0, exact = 0;
  for (size_t row = 0; row < 6; ++row) {
    double ms = 0;
    for (size_t k = 0; k < 40; ++k) ms += static_cast<double>(f32(x[row * 40 + k])) * f32(x[row * 40 + k]) / 40.0;
    const float rs = static_cast<float>(1.0 / std::sqrt(ms + e));
    for (size_t k = 0; k < 40; ++k) {
      // The stock chain: normed rounds to bf16, then the bf16 product rounds again.
      const uint16_t want = bf16(f32(wv[k]) * f32(bf16(f32(x[row * 40 + k]) * rs)));
      off_by_more += std::abs(static_cast<int>(y[row * 40 + k]) - static_cast<int>(want)) > 1;
      exact += y[row * 40 + k] == want;
    }
  }
  CHECK(off_by_more == 0);  // within one bf16 step of the stock chain's double rounding
  // And equal almost everywhere (its sums differ in the last bits): without the
  // cast's rounding, 188 of 240 were.
  CHECK(exact >= 228);
}

// Attention scores: softmax(x * 0.125 + mask) over the last dim (or
// log_softmax over dim 1), x [2, 3, 5, 37], mask [2, 1, 5, 37] (two runs of
// dims), in float32.
Target scaled_masked_softmax(const char* op = "aten::_softmax", int dim = -1) {
  const json x = tensor({2, 3, 5, 37}), mask = tensor({2, 1, 5, 37}), scale = tensor({}, "float64");
  Target t;
  t.op = "forge_chain::c_attn";
  t.args = json::array({x, scale, mask});
  t.outputs = json::array({x});
  json ops = json::array();
  ops.push_back({{"op", "aten::mul"}, {"overload", "Tensor"}, {"args", {input(x, 0), input(scale, 1)}}});
  ops.push_back({{"op", "aten::add"}, {"overload", "Tensor"}, {"args", {link(x, 0), input(mask, 2), number(1)}}});
  ops.push_back({{"op", op}, {"overload", ""},
                 {"args", {link(x, 1), {{"type", "int"}, {"value", dim}}, {{"type", "bool"}, {"value", false}}}}});
  t.chain = {{"inputs", 3}, {"ops", ops}, {"outputs", 1}};
  return t;
}

TEST_CASE("a softmax with a scale and mask prologue runs in the reduce_pointwise templates, rows and columns") {
  std::vector<float> x(2 * 3 * 5 * 37), mask(2 * 5 * 37), y(x.size(), NAN);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)) * 8.0);
  for (size_t i = 0; i < mask.size(); ++i) mask[i] = (i % 37) > (i / 37) % 5 + 30 ? -INFINITY : 0.0f;  // causal-like
  mask[3 * 37 + 4] = -3.0f;
  double scale = 0.125;
  auto run = [&](const Target& t) {
    const auto strategies = chain_strategies(t);
    REQUIRE_MESSAGE(strategies.strategies.size() == 2, strategies.why);
    CHECK(strategies.strategies[0].name == "reduce_pointwise");
    test::TempDir tmp;
    auto [lib, kernel] = load_cpu(strategies.strategies[0], tmp);
    forge_tensor in[3] = {view(x.data(), {2, 3, 5, 37}, FORGE_FLOAT32), view(&scale, {}, FORGE_FLOAT64),
                          view(mask.data(), {2, 1, 5, 37}, FORGE_FLOAT32)};
    forge_tensor out[1] = {view(y.data(), {2, 3, 5, 37}, FORGE_FLOAT32)};
    forge_call call{};
    call.inputs = in, call.n_inputs = 3, call.outputs = out, call.n_outputs = 1;
    REQUIRE(kernel(&call) == 0);
  };
  auto pre = [&](size_t b, size_t h, size_t q, size_t k) {
    return static_cast<double>(x[((b * 3 + h) * 5 + q) * 37 + k]) * 0.125 + mask[(b * 5 + q) * 37 + k];
  };
  run(scaled_masked_softmax());
  for (size_t b = 0; b < 2; ++b)
    for (size_t h = 0; h < 3; ++h)
      for (size_t q = 0; q < 5; ++q) {
        double mx = -INFINITY, sum = 0;
        for (size_t k = 0; k < 37; ++k) mx = std::max(mx, pre(b, h, q, k));
        for (size_t k = 0; k < 37; ++k) sum += std::exp(pre(b, h, q, k) - mx);
        for (size_t k = 0; k < 37; ++k) {
          const size_t j = ((b * 3 + h) * 5 + q) * 37 + k;
          CAPTURE(j);
          CHECK(std::fabs(y[j] - std::exp(pre(b, h, q, k) - mx) / sum) <= 1e-6);
        }
      }
  run(scaled_masked_softmax("aten::_log_softmax", 1));  // over the heads: columns
  for (size_t b = 0; b < 2; ++b)
    for (size_t q = 0; q < 5; ++q)
      for (size_t k = 0; k < 37; ++k) {
        double mx = -INFINITY, sum = 0;
        for (size_t h = 0; h < 3; ++h) mx = std::max(mx, pre(b, h, q, k));
        for (size_t h = 0; h < 3; ++h) sum += std::exp(pre(b, h, q, k) - mx);
        for (size_t h = 0; h < 3; ++h) {
          const size_t j = ((b * 3 + h) * 5 + q) * 37 + k;
          const double want = pre(b, h, q, k) - mx - std::log(sum);
          CAPTURE(j);
          if (std::isnan(want)) CHECK(std::isnan(y[j]));  // masked in every head: NaN, as torch's
          else CHECK(std::fabs(y[j] - want) <= 1e-5 * (1.0 + std::fabs(want)));
        }
      }
  // A softmax that casts its input to half on the way (half_to_float) is taken
  // too; a softmax of another shape than the output is not.
  std::string why;
  Target t = scaled_masked_softmax();
  t.chain["ops"][2]["args"][2]["value"] = true;
  CHECK_FALSE(reduce_definition(t, &why).empty());
  t = scaled_masked_softmax();
  t.outputs[0] = tensor({2, 3, 5, 36});
  CHECK(reduce_definition(t, &why).empty());
  CHECK(why.find("does not reduce a tensor of the output's shape") != std::string::npos);
}

TEST_SUITE_END();
}  // namespace forge
