#include <doctest/doctest.h>
#include <dlfcn.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <set>

#include "rules/evaluate/compile.h"
#include "rules/evaluate/family.h"
#include "rules/search/strategies.h"
#include "util/error.h"
#include "util/process.h"
#include "runtime/abi/forge_kernel.h"
#include "tests/support.h"

namespace forge {
using nlohmann::json;

TEST_SUITE_BEGIN("rules::Strategies");

namespace {
Strategy make(std::string name, json params) {
  Strategy s;
  s.name = std::move(name);
  s.backend = "cpu";
  s.params = std::move(params);
  s.applies = {{"dtype", {"float32"}}, {"layout", "contiguous"}};
  s.text = "int forge_kernel();\n";
  return s;
}
Target softmax_target(std::vector<long> strides) {
  Target t;
  t.args = json::array({{{"type", "Tensor"}, {"dtype", "float32"}, {"sizes", {4, 8}},
                         {"strides", strides}}});
  t.outputs = json::array({{{"type", "Tensor"}, {"dtype", "float32"}, {"sizes", {4, 8}},
                            {"strides", {8, 1}}}});
  return t;
}
}  // namespace

TEST_CASE("every shipped strategy library loads and its sources exist") {
  for (const auto& f : load_families(default_targets_dir())) {
    auto strategies = load_strategies(f);
    for (const auto& s : strategies) {
      CHECK_FALSE(s.text.empty());
      CHECK((s.backend == "cpu" || s.backend == "cuda"));
      CHECK_FALSE(param_grid(s).empty());
    }
  }
}

// targets/_common/: templates share helper blocks, inlined when loaded so
// that each candidate stays one self-contained source.
TEST_CASE("a template's #include \"../_common/NAME\" line becomes that file's text; a missing one names the line") {
  test::TempDir dir;
  test::write_text(dir / "fam" / "family.yaml",
                   "name: fam\nops: [_softmax]\ntolerance: {float32: {atol: 0, rtol: 0}}\n");
  test::write_text(dir / "fam" / "strategies.yaml",
                   "strategies:\n  - {name: k, backend: cpu, source: k.cpp}\n");
  test::write_text(dir / "_common" / "helpers.h", "int helper() { return 1; }\n");
  test::write_text(dir / "fam" / "k.cpp",
                   "// k\n#include \"../_common/helpers.h\"  // shared\nint forge_kernel() { return helper(); }\n");
  auto families = load_families(dir.path());
  REQUIRE(families.size() == 1);  // _common has no family.yaml: not a family
  auto strategies = load_strategies(families[0]);
  REQUIRE(strategies.size() == 1);
  CHECK(strategies[0].text == "// k\nint helper() { return 1; }\nint forge_kernel() { return helper(); }\n");

  // A shared block may include another; a cycle is an error, not a hang.
  test::write_text(dir / "_common" / "outer.h", "#include \"../_common/helpers.h\"\nint outer() { return helper(); }\n");
  test::write_text(dir / "fam" / "k.cpp", "#include \"../_common/outer.h\"\n");
  CHECK(load_strategies(families[0])[0].text == "int helper() { return 1; }\nint outer() { return helper(); }\n");
  test::write_text(dir / "_common" / "loop.h", "#include \"../_common/loop.h\"\n");
  test::write_text(dir / "fam" / "k.cpp", "#include \"../_common/loop.h\"\n");
  CHECK_THROWS_WITH_AS(load_strategies(families[0]), doctest::Contains("nested more than 4 deep"), Error);

  test::write_text(dir / "fam" / "k.cpp", "// k\n\n#include \"../_common/missing.h\"\n");
  try {
    load_strategies(families[0]);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find((dir / "fam" / "k.cpp").string() + ":3: cannot read the shared block") == 0);
  }
}

TEST_CASE("the shipped templates load with their shared blocks inlined") {
  for (const auto& f : load_families(default_targets_dir()))
    for (const auto& s : load_strategies(f)) {
      CHECK(s.text.find("../_common/") == std::string::npos);
      const bool cuda = s.backend == "cuda";
      CHECK(s.text.find(cuda ? "/* ---- common device helpers" : "/* ---- ISA selection") != std::string::npos);
    }
}

// bench/templates/template_text.py is inline_common in Python, for scripts that
// run without a forge build (the CPU bench, the GPU probes): it must write the
// very text forge loads, or a probe measures another kernel than the search.
TEST_CASE("template_text.py writes each shipped template exactly as forge loads it") {
  auto runner = make_process_runner();
  const auto script = std::filesystem::path(FORGE_TEST_DIR).parent_path() / "bench" / "templates" / "template_text.py";
  int checked = 0;
  for (const auto& f : load_families(default_targets_dir()))
    for (const auto& s : load_strategies(f)) {
      Command c;
      c.argv = {"python3", script.string(), s.source.string()};
      c.timeout_seconds = 60;
      CommandResult r = runner->run(c);
      INFO(s.source.string() << ": " << r.describe() << " " << r.err);
      REQUIRE(r.ok());
      CHECK(r.out == s.text);
      ++checked;
    }
  CHECK(checked >= 20);
}

TEST_CASE("instances are the template with #defines in front; grids are complete") {
  Strategy s = make("rows", {{"VEC", {8, 16}}, {"UNROLL", {1, 2, 4}}});
  CHECK(param_grid(s).size() == 6);
  CHECK(param_grid(s).front() == json{{"UNROLL", 1}, {"VEC", 8}});
  std::string src = instantiate(s, {{"VEC", 16}, {"UNROLL", 2}});
  CHECK(src == "// forge strategy rows\n#define FORGE_P_UNROLL 2\n#define FORGE_P_VEC 16\n"
               "int forge_kernel();\n");
}

TEST_CASE("an instance compiles only the dtypes of the signature's tensors (FORGE_DTYPES)") {
  Strategy s = make("rows", {{"VEC", {8}}});
  Target t = softmax_target({8, 1});
  t.args[0]["dtype"] = "bfloat16";
  CHECK(signature_facts(t).dtypes == ((1u << 3) | (1u << 0)));  // bf16 in, fp32 out
  CHECK(instantiate(s, {{"VEC", 8}}, signature_facts(t)) ==
        "// forge strategy rows\n#define FORGE_DTYPES 9\n#define FORGE_P_VEC 8\nint forge_kernel();\n");
  t.outputs = json::array();  // output dtype unknown: every type stays compiled in
  CHECK(signature_facts(t).dtypes == 0);
  t.args[0]["dtype"] = "int64";
  t.outputs = softmax_target({8, 1}).outputs;
  CHECK(signature_facts(t).dtypes == 0);
  // Every tensor's type, not the first two alone: autocast's bf16 input with
  // float32 weights, a float16 tensor in a Tensor[] argument.
  t = softmax_target({8, 1});
  t.args[0]["dtype"] = "bfloat16";
  t.outputs[0]["dtype"] = "bfloat16";
  t.args.push_back({{"type", "Tensor"}, {"dtype", "float32"}, {"sizes", {8}}, {"strides", {1}}});
  CHECK(signature_facts(t).dtypes == ((1u << 3) | (1u << 0)));
  t.args.push_back({{"type", "Tensor[]"}, {"value", {{{"type", "Tensor"}, {"dtype", "float16"}}}}});
  CHECK(signature_facts(t).dtypes == ((1u << 3) | (1u << 2) | (1u << 0)));
}

TEST_CASE("applies: dtype, output dtype and layout") {
  Strategy s = make("rows", json::object());
  CHECK(strategy_applies(s, softmax_target({8, 1}), "cpu"));
  CHECK_FALSE(strategy_applies(s, softmax_target({1, 4}), "cpu"));  // transposed
  CHECK_FALSE(strategy_applies(s, softmax_target({8, 1}), "cuda"));
  Target half = softmax_target({8, 1});
  half.args[0]["dtype"] = "float16";
  CHECK_FALSE(strategy_applies(s, half, "cpu"));
}

TEST_CASE("applies: batch_norm's strategies split by training mode (a YAML boolean)") {
  Target t;
  t.op = "native_batch_norm";
  json x = {{"type", "Tensor"}, {"dtype", "bfloat16"}, {"sizes", {64, 256, 56, 56}},
            {"strides", {802816, 3136, 56, 1}}};
  json c = {{"type", "Tensor"}, {"dtype", "bfloat16"}, {"sizes", {256}}, {"strides", {1}}};
  t.args = json::array({x, c, c, c, c, {{"type", "bool"}, {"value", false}},
                        {{"type", "float"}, {"value", 0.1}}, {{"type", "float"}, {"value", 1e-5}}});
  t.outputs = json::array({x});
  int cuda = 0, cpu = 0;
  for (const auto& f : load_families(default_targets_dir()))
    if (f.name == "batch_norm")
      for (const auto& s : load_strategies(f)) {
        cuda += strategy_applies(s, t, "cuda");
        cpu += strategy_applies(s, t, "cpu");
      }
  CHECK(cuda == 2);
  CHECK(cpu == 2);
  // Training mode: train_planes on the CPU (float32 only), train_split on CUDA.
  t.args[5]["value"] = true;
  std::vector<std::string> train_cuda, train_cpu_bf16, train_cpu_f32;
  Target f32 = t;
  for (size_t i = 0; i < 5; ++i) f32.args[i]["dtype"] = "float32";
  f32.outputs[0]["dtype"] = "float32";
  for (const auto& f : load_families(default_targets_dir()))
    if (f.name == "batch_norm")
      for (const auto& s : load_strategies(f)) {
        if (strategy_applies(s, t, "cuda")) train_cuda.push_back(s.name);
        if (strategy_applies(s, t, "cpu")) train_cpu_bf16.push_back(s.name);
        if (strategy_applies(s, f32, "cpu")) train_cpu_f32.push_back(s.name);
      }
  CHECK(train_cuda == std::vector<std::string>{"train_split"});
  CHECK(train_cpu_bf16.empty());
  CHECK(train_cpu_f32 == std::vector<std::string>{"train_planes"});
}

// cudnn_batch_norm (a float32 BatchNorm with weights on CUDA) is the family's
// op too, its training flag read the same way.
TEST_CASE("applies: cudnn_batch_norm gets the batch_norm family's CUDA strategies by training mode") {
  Target t;
  t.op = "cudnn_batch_norm";
  json x = {{"type", "Tensor"}, {"dtype", "float32"}, {"sizes", {8, 32, 32, 32}}, {"strides", {32768, 1024, 32, 1}}};
  json c = {{"type", "Tensor"}, {"dtype", "float32"}, {"sizes", {32}}, {"strides", {1}}};
  t.args = json::array({x, c, c, c, c, {{"type", "bool"}, {"value", true}}, {{"type", "float"}, {"value", 0.1}},
                        {{"type", "float"}, {"value", 1e-5}}});
  t.outputs = json::array({x});
  const auto family = find_family(load_families(default_targets_dir()), t.op);
  REQUIRE(family);
  CHECK(family->name == "batch_norm");
  auto names = [&](const Target& tt) {
    std::vector<std::string> out;
    for (const auto& s : load_strategies(*family))
      if (strategy_applies(s, tt, "cuda")) out.push_back(family->name + "/" + s.name);
    return out;
  };
  CHECK(names(t) == std::vector<std::string>{"batch_norm/train_split"});
  t.args[5]["value"] = false;
  CHECK(names(t) == std::vector<std::string>{"batch_norm/flat_affine", "batch_norm/plane_lanes"});
}

// The pointwise templates cover an op table: `applies: {op: [...]}` names the
// ops (an in-place form matches its out-of-place op), "$op" writes the op's
// name into the instance, so one template computes exactly the captured op.
TEST_CASE("applies: op lists the ops a template computes; \"$op\" instantiates the captured one") {
  json x = {{"type", "Tensor"}, {"dtype", "float32"}, {"sizes", {8, 16}}, {"strides", {16, 1}}};
  Target t;
  t.args = json::array({x, x, {{"type", "Scalar"}, {"value", 1}}});
  t.outputs = json::array({x});
  Strategy s = make("strided", {{"OP", {"$op"}}});
  s.applies["op"] = {"add.Tensor", "relu"};
  s.applies.erase("layout");
  for (const char* op : {"add.Tensor", "add_.Tensor"}) {
    t.op = op;
    CAPTURE(op);
    CHECK(signature_facts(t).op == "add.Tensor");
    CHECK(signature_facts(t).op_name == "add");
    CHECK(strategy_applies(s, t, "cpu"));
    CHECK(instantiate(s, {{"OP", "$op"}}, signature_facts(t)).find("#define FORGE_P_OP add\n") != std::string::npos);
  }
  t.op = "add.Scalar";  // another overload: another schema, not in the table
  auto unmet = unmet_conditions(s, t, "cpu");
  REQUIRE(unmet.size() == 1);
  CHECK(unmet[0] == "op in [add.Tensor, relu] (here add.Scalar)");
  t.op = "relu_";
  CHECK(signature_facts(t).op == "relu");
  CHECK(strategy_applies(s, t, "cpu"));
  t.op = "_softmax";  // a leading underscore stays
  CHECK(signature_facts(t).op == "_softmax");

  // The shipped families: relu and its in-place form are pointwise's, add.Tensor binary's.
  auto families = load_families(default_targets_dir());
  CHECK(find_family(families, "relu_")->name == "pointwise");
  CHECK(find_family(families, "add_.Tensor")->name == "binary");
  CHECK_FALSE(find_family(families, "add.Scalar"));
  // An overload is its own op: clamp.Tensor (tensor bounds) is not clamp's
  // family (scalar bounds), whose verification would vary the batch of self
  // while the bounds keep their captured shape.
  CHECK(find_family(families, "clamp")->name == "pointwise");
  CHECK_FALSE(find_family(families, "clamp.Tensor"));
}

// softmax's row templates take the last dim; `columns` (dim: not_last) every
// other, for _softmax and _log_softmax alike.
TEST_CASE("applies: softmax's columns strategy takes a dim that is not the last, row strategies the last") {
  json x = {{"type", "Tensor"}, {"dtype", "float32"}, {"sizes", {8, 48, 40}}, {"strides", {1920, 40, 1}}};
  Target t;
  t.outputs = json::array({x});
  auto names = [&](int64_t dim) {
    t.args = json::array({x, {{"type", "int"}, {"value", dim}}, {{"type", "bool"}, {"value", false}}});
    std::set<std::string> out;
    for (const auto& f : load_families(default_targets_dir()))
      if (f.name == "softmax")
        for (const auto& s : load_strategies(f))
          if (strategy_applies(s, t, "cpu")) out.insert(s.name);
    return out;
  };
  for (const char* op : {"_softmax", "_log_softmax"}) {
    t.op = op;
    CAPTURE(op);
    CHECK(names(-1) == std::set<std::string>{"rows_3pass", "online_2pass"});
    CHECK(names(2) == std::set<std::string>{"rows_3pass", "online_2pass"});
    CHECK(names(1) == std::set<std::string>{"columns"});
    CHECK(names(0) == std::set<std::string>{"columns"});
    CHECK(signature_facts(t).row == 8);
  }
}

namespace {
// native_layer_norm over the last len(shape) dims of a float32 input of these
// sizes and strides, with weight and bias; out contiguous, as stock allocates it.
Target layer_norm_target(std::vector<long> sizes, std::vector<long> strides, std::vector<long> shape) {
  auto record = [](std::vector<long> sz, std::vector<long> st) {
    return json{{"type", "Tensor"}, {"dtype", "float32"}, {"sizes", sz}, {"strides", st}};
  };
  std::vector<long> packed(sizes.size(), 1);
  for (size_t d = sizes.size() - 1; d-- > 0;) packed[d] = packed[d + 1] * sizes[d + 1];
  std::vector<long> wst(shape.size(), 1);
  for (size_t d = shape.size() - 1; d-- > 0;) wst[d] = wst[d + 1] * shape[d + 1];
  Target t;
  t.op = "native_layer_norm";
  t.args = json::array({record(sizes, strides), {{"type", "int[]"}, {"value", shape}}, record(shape, wst),
                        record(shape, wst), {{"type", "float"}, {"value", 1e-5}}});
  t.outputs = json::array({record(sizes, packed)});
  return t;
}
std::vector<std::string> applying(const Target& t) {
  std::vector<std::string> names;
  for (const auto& f : load_families(default_targets_dir()))
    if (f.name == "layer_norm")
      for (const auto& s : load_strategies(f))
        if (strategy_applies(s, t, "cpu")) names.push_back(s.name);
  return names;
}
}  // namespace

// The contiguous templates take contiguous inputs only; `strided` takes exactly
// the non-contiguous calls whose normalized dims step by one stride (what its
// kernel handles, any outer strides), and names that condition otherwise.
TEST_CASE("applies: layer_norm's strided strategy takes the strided calls it handles, and says why not") {
  using names = std::vector<std::string>;
  CHECK(applying(layer_norm_target({32, 64}, {64, 1}, {64})) == names{"two_pass", "one_read"});
  CHECK(applying(layer_norm_target({32, 64}, {1, 32}, {64})) == names{"strided"});            // x.t()
  CHECK(applying(layer_norm_target({20, 4, 48}, {48, 960, 1}, {48})) == names{"strided"});   // transpose(0, 1)
  CHECK(applying(layer_norm_target({5, 3, 7}, {7, 0, 1}, {7})) == names{"strided"});         // a broadcast dim
  CHECK(applying(layer_norm_target({48, 4, 20}, {1, 960, 48}, {4, 20})) == names{"strided"});  // two dims, one stride
  // Two normalized dims that are permuted in memory: no strategy; the nearest
  // is `strided`, and the reason says what it needs.
  const Target permuted = layer_norm_target({4, 8, 16}, {128, 1, 8}, {8, 16});
  CHECK(applying(permuted).empty());
  std::vector<Strategy> all;
  for (const auto& f : load_families(default_targets_dir()))
    if (f.name == "layer_norm") all = load_strategies(f);
  auto nearest = nearest_strategy(all, permuted, "cpu");
  REQUIRE(nearest);
  CHECK(nearest->strategy->name == "strided");
  CHECK(nearest->unmet == names{"layout [strided_rows] (here strides [128,1,8] for sizes [4,8,16]: the row's dims "
                                "do not step by one stride)"});
  Target f64 = layer_norm_target({32, 64}, {1, 32}, {64});
  f64.args[0]["dtype"] = "float64";
  CHECK(applying(f64).empty());
  nearest = nearest_strategy(all, f64, "cpu");
  REQUIRE(nearest);
  CHECK(nearest->strategy->name == "strided");
  CHECK(nearest->unmet == names{"dtype in [float32, bfloat16, float16] (here float64)"});
}

// The strided instance the search tries first, on a transposed call (W rows
// per vector plus a partial block) against a float64 reference, and its
// refusal of a call whose normalized dims are permuted.
TEST_CASE("layer_norm's strided instance computes a transposed call and declines a permuted row") {
  const int64_t M = 19, N = 37;  // x = base.t(), base [N, M] contiguous
  std::vector<Strategy> all;
  for (const auto& f : load_families(default_targets_dir()))
    if (f.name == "layer_norm") all = load_strategies(f);
  const Strategy* strided = nullptr;
  for (const auto& s : all)
    if (s.name == "strided") strided = &s;
  REQUIRE(strided);
  const Target target = layer_norm_target({M, N}, {1, M}, {N});
  test::TempDir tmp;
  test::write_text(tmp / "candidate.cpp", instantiate(*strided, param_grid(*strided).front(), signature_facts(target)));
  Command compile;
  compile.argv = compile_flags(CandidateLang::Cpp, "");
  for (std::string a : {(tmp / "candidate.cpp").string(), std::string("-o"), (tmp / "candidate.so").string()})
    compile.argv.push_back(a);
  compile.timeout_seconds = 120;
  const CommandResult built = make_process_runner()->run(compile);
  REQUIRE_MESSAGE(built.ok(), built.err);
  std::unique_ptr<void, int (*)(void*)> lib(dlopen((tmp / "candidate.so").c_str(), RTLD_NOW | RTLD_LOCAL), dlclose);
  REQUIRE_MESSAGE(lib, dlerror());
  void* entry = dlsym(lib.get(), "forge_kernel");
  REQUIRE(entry);
  auto kernel = reinterpret_cast<int (*)(const forge_call*)>(entry);

  std::vector<float> base(N * M), w(N), b(N), y(M * N, NAN), mean(M, NAN), rstd(M, NAN);
  for (size_t i = 0; i < base.size(); ++i) base[i] = std::sin(0.7f * static_cast<float>(i)) * 2.0f + 1.0f;
  for (int64_t c = 0; c < N; ++c) w[c] = 0.5f + 0.01f * c, b[c] = 0.1f * c - 1.0f;
  auto tensor = [](void* data, std::vector<int64_t> sizes, std::vector<int64_t> strides) {
    forge_tensor t{};
    t.data = data, t.ndim = static_cast<int32_t>(sizes.size()), t.dtype = FORGE_FLOAT32;
    for (size_t d = 0; d < sizes.size(); ++d) t.sizes[d] = sizes[d], t.strides[d] = strides[d];
    return t;
  };
  forge_tensor in[3] = {tensor(base.data(), {M, N}, {1, M}), tensor(w.data(), {N}, {1}), tensor(b.data(), {N}, {1})};
  forge_tensor out[3] = {tensor(y.data(), {M, N}, {N, 1}), tensor(mean.data(), {M, 1}, {1, 1}),
                         tensor(rstd.data(), {M, 1}, {1, 1})};
  forge_scalar scalars[2] = {};
  scalars[0].kind = FORGE_ARG_INT_LIST, scalars[0].len = 1, scalars[0].ints[0] = N;
  scalars[1].kind = FORGE_ARG_FLOAT, scalars[1].f = 1e-5;
  const forge_call call{in, 3, out, 3, scalars, 2, nullptr, 0, nullptr};
  REQUIRE(kernel(&call) == 0);
  for (int64_t r = 0; r < M; ++r) {
    double mu = 0, var = 0;
    for (int64_t c = 0; c < N; ++c) mu += base[c * M + r];
    mu /= N;
    for (int64_t c = 0; c < N; ++c) var += (base[c * M + r] - mu) * (base[c * M + r] - mu);
    const double rs = 1.0 / std::sqrt(var / N + 1e-5);
    CHECK(std::fabs(mean[r] - mu) <= 1e-5);
    CHECK(std::fabs(rstd[r] - rs) <= 1e-5 * rs);
    for (int64_t c = 0; c < N; ++c)
      CHECK(std::fabs(y[r * N + c] - ((base[c * M + r] - mu) * rs * w[c] + b[c])) <= 1e-5);
  }
  // normalized_shape [M, N] over a [1, M, N] view with strides {.., 1, M}: the
  // two normalized dims are permuted in memory, no one stride: declined.
  in[0] = tensor(base.data(), {1, M, N}, {M * N, 1, M});
  out[0] = tensor(y.data(), {1, M, N}, {M * N, N, 1});
  out[1] = tensor(mean.data(), {1, 1, 1}, {1, 1, 1});
  out[2] = tensor(rstd.data(), {1, 1, 1}, {1, 1, 1});
  scalars[0].len = 2, scalars[0].ints[0] = M, scalars[0].ints[1] = N;
  in[1] = tensor(w.data(), {M, N}, {N, 1});  // sizes only; weight and bias absent below
  in[1].data = nullptr, in[1].ndim = -1;
  in[2] = in[1];
  CHECK(kernel(&call) != 0);
}

TEST_CASE("param_neighbours: one parameter moved one step along its list") {
  Strategy s;
  s.name = "k";
  s.params = json{{"A", {1, 2, 3}}, {"B", {8, 16}}};
  auto n = param_neighbours(s, json{{"A", 2}, {"B", 8}});
  REQUIRE(n.size() == 3);
  CHECK(n[0] == json{{"A", 1}, {"B", 8}});
  CHECK(n[1] == json{{"A", 3}, {"B", 8}});
  CHECK(n[2] == json{{"A", 2}, {"B", 16}});
  CHECK(param_neighbours(s, json{{"A", 1}, {"B", 16}}).size() == 2);  // ends of both lists
}

TEST_CASE("the proposer starts with each strategy's defaults, then refines one step at a time") {
  std::vector<Strategy> lib{make("a", {{"X", {1, 2, 3}}}), make("b", {{"Y", {7}}})};
  StrategyProposer p(lib);
  mcts::Tree tree;
  mcts::Rng rng(0);
  auto root = p.actions(tree, mcts::kRoot, rng);
  REQUIRE(root.size() == 4);  // a{X:1}, b{Y:7}, then a{X:2}, a{X:3}
  CHECK(root[0].strategy == "a");
  CHECK(root[1].strategy == "b");
  CHECK(root[2].params == json{{"X", 2}});
  mcts::Search search(tree, p);
  auto node = search.begin_expansion({mcts::kRoot, mcts::Action{"strategy", "a", {{"X", 2}}, ""}});
  mcts::Outcome ok;
  ok.status = mcts::Outcome::Status::Ok;
  ok.speedup = 1.5;
  search.complete(node, ok);
  auto children = p.actions(tree, node, rng);
  REQUIRE(children.size() == 2);  // X:1 and X:3; never X:2 again
  CHECK(children[0].params == json{{"X", 1}});
  CHECK(children[1].params == json{{"X", 3}});
}

namespace {
// _softmax over the last dim of a contiguous [rows, row] tensor of `dtype`.
Target softmax_rows(int64_t rows, int64_t row, const std::string& dtype) {
  json x = {{"type", "Tensor"}, {"dtype", dtype}, {"sizes", {rows, row}}, {"strides", {row, 1}}};
  Target t;
  t.op = "_softmax";
  t.args = json::array({x, {{"type", "int"}, {"value", -1}}, {{"type", "bool"}, {"value", false}}});
  t.outputs = json::array({x});
  return t;
}
}  // namespace

// A capacity is the longest row an instance holds; instances below the
// signature's row decline every call, so the proposer must skip them.
TEST_CASE("capacity: the proposer starts at the first instance that holds the row and never proposes one that cannot") {
  Strategy s = make("c", {{"CLUSTER", {2, 4, 8}}, {"CHUNKS", {4, 8}}});
  s.backend = "cuda";
  s.capacity["row"] = {"CLUSTER", "CHUNKS", "$vec"};
  const Target t = softmax_rows(4, 100, "float32");  // $vec 4: needs CLUSTER*CHUNKS >= 25
  const SignatureFacts f = signature_facts(t);
  CHECK(f.in_bytes == 4);
  CHECK_FALSE(fits_capacity(s, json{{"CLUSTER", 4}, {"CHUNKS", 4}}, f));  // 64 < 100
  CHECK(fits_capacity(s, json{{"CLUSTER", 4}, {"CHUNKS", 8}}, f));        // 128
  StrategyProposer p({s}, f);
  mcts::Tree tree;
  mcts::Rng rng(0);
  auto root = p.actions(tree, mcts::kRoot, rng);
  // The grid nests params by name (CHUNKS outer): {CHUNKS 4, CLUSTER 8}, then
  // {8, 4}, {8, 8}; never one whose product is below 25.
  REQUIRE(root.size() == 3);
  CHECK(root[0].params == json{{"CLUSTER", 8}, {"CHUNKS", 4}});
  CHECK(root[1].params == json{{"CLUSTER", 4}, {"CHUNKS", 8}});
  CHECK(root[2].params == json{{"CLUSTER", 8}, {"CHUNKS", 8}});
  // Refinements skip the instances that cannot hold the row: from {8,4} only {8,8}.
  auto n = param_neighbours(s, json{{"CLUSTER", 8}, {"CHUNKS", 4}}, f);
  CHECK(n == std::vector<json>{json{{"CLUSTER", 8}, {"CHUNKS", 8}}});
  // bfloat16: $vec 8, so {CHUNKS 4, CLUSTER 4} (128) is the first that holds 104.
  auto bf16_root = StrategyProposer({s}, signature_facts(softmax_rows(4, 104, "bfloat16"))).actions(tree, mcts::kRoot, rng);
  REQUIRE_FALSE(bf16_root.empty());
  CHECK(bf16_root[0].params == json{{"CLUSTER", 4}, {"CHUNKS", 4}});
  // A row that is no whole number of 16-byte vectors runs the templates'
  // scalar path: $vec is 1 there, so 101 floats need CLUSTER*CHUNKS >= 101
  // (64 at most); 60 floats are 15 vectors: {CHUNKS 4, CLUSTER 4} holds 64.
  CHECK(first_fitting(s, signature_facts(softmax_rows(4, 101, "float32"))) == std::nullopt);
  CHECK(first_fitting(s, signature_facts(softmax_rows(4, 60, "float32"))) == json{{"CLUSTER", 4}, {"CHUNKS", 4}});
  // No instance holds 1000: the strategy does not apply, and says how far it reaches.
  s.applies = json::object();
  auto unmet = unmet_conditions(s, softmax_rows(4, 1000, "float32"), "cuda");
  REQUIRE(unmet.size() == 1);
  CHECK(unmet[0] == "row <= CLUSTER*CHUNKS*$vec, at most 256 (here 1000)");
  CHECK(strategy_applies(s, t, "cuda"));
}

// KernelBench 23: softmax over 393216-element float32 rows. cluster_row's
// first instance holds 32768; the root must start at one that holds the row.
TEST_CASE("capacity: softmax cluster_row at a 393216-element row starts at an instance that holds it") {
  const Target t = softmax_rows(4096, 393216, "float32");
  for (const auto& f : load_families(default_targets_dir()))
    if (f.name == "softmax")
      for (const auto& s : load_strategies(f))
        if (s.name == "cluster_row") {
          REQUIRE(strategy_applies(s, t, "cuda"));
          auto p = first_fitting(s, signature_facts(t));
          REQUIRE(p);
          CHECK((*p)["CLUSTER"] == 16);
          CHECK((*p)["BLOCK"].get<int>() * (*p)["CHUNKS"].get<int>() * 16 * 4 >= 393216);
          CHECK_FALSE(fits_capacity(s, param_grid(s).front(), signature_facts(t)));
        }
}

TEST_CASE("capacity: a factor that is not a param, an integer or $vec names the file and line") {
  test::TempDir dir;
  test::write_text(dir / "fam" / "family.yaml",
                   "name: fam\nops: [_softmax]\ntolerance: {float32: {atol: 0, rtol: 0}}\n");
  test::write_text(dir / "fam" / "k.cpp", "int forge_kernel();\n");
  test::write_text(dir / "fam" / "strategies.yaml",
                   "strategies:\n  - name: k\n    backend: cpu\n    source: k.cpp\n    params: {A: [1, 2]}\n"
                   "    capacity: {row: A*B*$vec}\n");
  auto families = load_families(dir.path());
  REQUIRE(families.size() == 1);
  CHECK_THROWS_WITH_AS(load_strategies(families[0]),
                       doctest::Contains("strategies.yaml:2: strategy 'k': capacity.row: 'B' is neither a param"), Error);
  test::write_text(dir / "fam" / "strategies.yaml",
                   "strategies:\n  - name: k\n    backend: cpu\n    source: k.cpp\n    params: {A: [1, 2]}\n"
                   "    capacity: {row: A*2*$vec}\n");
  auto ok = load_strategies(families[0]);
  REQUIRE(ok.size() == 1);
  CHECK(ok[0].capacity.at("row") == std::vector<std::string>{"A", "2", "$vec"});
}

namespace {
uint16_t to_bf16(float f) {  // round to nearest even
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
float from_bf16(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
forge_tensor tensor_1d(void* data, int64_t n) {
  forge_tensor t{};
  t.data = data, t.sizes[0] = n, t.strides[0] = 1, t.ndim = 1, t.dtype = FORGE_BFLOAT16;
  return t;
}

// Stock CPU batch_norm returns its saved statistics empty in eval mode, and a
// bf16 signature's instance compiles only the signature's dtypes (FORGE_DTYPES):
// the empty outputs' dtype must not need float32 (it did, and every call fell
// back), and autocast's float32 parameters beside a bf16 input must be in the
// instance (they were not: only the first input's and output's types were).
void check_cpu_batch_norm_bf16(bool fp32_params) {
  const Strategy* plane = nullptr;
  std::vector<Strategy> strategies;
  for (const auto& f : load_families(default_targets_dir()))
    if (f.name == "batch_norm") strategies = load_strategies(f);
  for (const auto& s : strategies)
    if (s.name == "plane_affine") plane = &s;
  REQUIRE(plane);
  const int64_t N = 2, C = 3, HW = 5;  // [2, 3, 5, 1]
  const std::string p_type = fp32_params ? "float32" : "bfloat16";
  auto record = [](const std::string& dtype, std::vector<long> sizes, std::vector<long> strides) {
    return json{{"type", "Tensor"}, {"dtype", dtype}, {"sizes", sizes}, {"strides", strides}};
  };
  Target target;
  target.op = "native_batch_norm";
  target.args = json::array({record("bfloat16", {N, C, HW, 1}, {C * HW, HW, 1, 1})});
  for (int i = 0; i < 4; ++i) target.args.push_back(record(p_type, {C}, {1}));
  target.outputs = json::array({record("bfloat16", {N, C, HW, 1}, {C * HW, HW, 1, 1}),
                                record("bfloat16", {0}, {1}), record("bfloat16", {0}, {1})});
  const SignatureFacts facts = signature_facts(target);
  CHECK(facts.dtypes == ((1u << FORGE_BFLOAT16) | (fp32_params ? 1u << FORGE_FLOAT32 : 0u)));
  test::TempDir tmp;
  test::write_text(tmp / "candidate.cpp", instantiate(*plane, param_grid(*plane).front(), facts));
  Command compile;
  compile.argv = compile_flags(CandidateLang::Cpp, "");
  for (std::string a : {(tmp / "candidate.cpp").string(), std::string("-o"), (tmp / "candidate.so").string()})
    compile.argv.push_back(a);
  compile.timeout_seconds = 120;
  const CommandResult built = make_process_runner()->run(compile);
  REQUIRE_MESSAGE(built.ok(), built.err);
  // Closed on every exit, a failed REQUIRE's too.
  std::unique_ptr<void, int (*)(void*)> lib(dlopen((tmp / "candidate.so").c_str(), RTLD_NOW | RTLD_LOCAL), dlclose);
  REQUIRE_MESSAGE(lib, dlerror());
  void* entry = dlsym(lib.get(), "forge_kernel");
  REQUIRE(entry);
  auto kernel = reinterpret_cast<int (*)(const forge_call*)>(entry);

  std::vector<uint16_t> x(N * C * HW), y(x.size(), 0x7fc0);  // y: NaN
  std::vector<float> p(4 * C);                                // w, b, rm, rv as float32 values
  for (size_t i = 0; i < x.size(); ++i) x[i] = to_bf16(0.37f * static_cast<float>(i % 11) - 1.5f);
  for (int64_t c = 0; c < C; ++c) {
    // Exact in bf16 too, so both storages give the same reference.
    p[c] = 0.5f + c, p[C + c] = 0.25f * c - 0.5f, p[2 * C + c] = 0.125f * c, p[3 * C + c] = 0.75f + c;
  }
  std::vector<uint16_t> p16(p.size());
  for (size_t i = 0; i < p.size(); ++i) p16[i] = to_bf16(p[i]);
  forge_tensor in[5] = {};
  for (int i = 0; i < 4; ++i) {
    in[1 + i] = fp32_params ? tensor_1d(p.data() + i * C, C) : tensor_1d(p16.data() + i * C, C);
    if (fp32_params) in[1 + i].dtype = FORGE_FLOAT32;
  }
  forge_tensor out[3] = {{}, tensor_1d(nullptr, 0), tensor_1d(nullptr, 0)};  // saves empty, as stock's
  const int64_t sizes[4] = {N, C, HW, 1}, strides[4] = {C * HW, HW, 1, 1};
  for (forge_tensor* t : {&in[0], &out[0]}) {
    t->ndim = 4, t->dtype = FORGE_BFLOAT16;
    std::memcpy(t->sizes, sizes, sizeof sizes);
    std::memcpy(t->strides, strides, sizeof strides);
  }
  in[0].data = x.data(), out[0].data = y.data();
  forge_scalar scalars[3] = {};
  scalars[0].kind = FORGE_ARG_BOOL;  // training = false
  scalars[1].kind = FORGE_ARG_FLOAT, scalars[1].f = 0.1;
  scalars[2].kind = FORGE_ARG_FLOAT, scalars[2].f = 1e-5;
  const forge_call call{in, 5, out, 3, scalars, 3, nullptr, 0, nullptr};
  REQUIRE(kernel(&call) == 0);
  for (int64_t i = 0; i < N * C * HW; ++i) {
    const int64_t c = i / HW % C;
    const float ref = (from_bf16(x[i]) - p[2 * C + c]) / std::sqrt(p[3 * C + c] + 1e-5f) * p[c] + p[C + c];
    CHECK(std::fabs(from_bf16(y[i]) - ref) <= 0.01f * std::fabs(ref) + 0.02f);  // bf16: 8 bits of mantissa
  }
}
}  // namespace

TEST_CASE("a CPU batch_norm instance for a bf16 signature runs stock's eval calls, empty saves and all") {
  SUBCASE("bf16 parameters") { check_cpu_batch_norm_bf16(false); }
  SUBCASE("float32 parameters (autocast)") { check_cpu_batch_norm_bf16(true); }
}

TEST_SUITE_END();
}  // namespace forge
