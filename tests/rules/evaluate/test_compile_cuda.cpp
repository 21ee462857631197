// Compiling CUDA candidates for real with nvcc, for sm_90a: a trivial .cu
// candidate (and a broken one) in one ninja run, and every shipped CUDA
// template's first instance. Needs nvcc, not a GPU: the gpu tier
// (CMakeLists.txt), run where the CUDA toolkit is (the H200: docs/PERF.md);
// skipped visibly without nvcc.
#include <doctest/doctest.h>

#include <string>

#include "rules/evaluate/compile.h"
#include "rules/search/chain_strategies.h"
#include "tests/rules/evaluate/compile_world.h"
#include "tests/support.h"

namespace forge {
using test::World;

TEST_SUITE_BEGIN("rules::CompileCuda");

TEST_CASE("a .cu candidate compiles for sm_90a with nvcc") {
  World w;
  if (w.ctx->toolchain.nvcc.empty()) {
    MESSAGE(
        "SKIPPED (no nvcc on this machine): " << doctest::getContextOptions()->currentTest->m_name);
    return;
  }
  const std::string cu =
      "#include \"forge_kernel.h\"\n"
      "__global__ void twice(float* o, const float* i, long n) {\n"
      "  long t = blockIdx.x * (long)blockDim.x + threadIdx.x;\n"
      "  if (t < n) o[t] = 2 * i[t];\n"
      "}\n"
      "extern \"C\" int forge_kernel(const forge_call* c) {\n"
      "  long n = c->inputs[0].sizes[0];\n"
      "  twice<<<(n + 255) / 256, 256, 0, (cudaStream_t)c->stream>>>(\n"
      "      (float*)c->outputs[0].data, (const float*)c->inputs[0].data, n);\n"
      "  return cudaGetLastError() == cudaSuccess ? 0 : 1;\n"
      "}\n";
  auto r = w.compile({{"twice.cu", cu, CandidateLang::Cuda},
                      {"broken.cu", "__global__ void k() { nope(); }\n", CandidateLang::Cuda}},
                     {.cuda_arch = "sm_90a"});
  CHECK(w.runner.ninja_runs == 1);
  REQUIRE_MESSAGE(r[0].ok, r[0].log);
  MESSAGE("nvcc compile of a trivial .cu candidate for sm_90a: " << r[0].seconds << " s");
  CHECK(r[1].reason == "compile_error");
  CHECK(r[1].log.find("candidate.cu(1)") != std::string::npos);
  // The device code is sm_90a SASS.
  Command c;
  c.argv = {"sh", "-c", "cuobjdump --list-elf '" + r[0].so_path.string() + "'"};
  c.env["PATH"] = forge_path_env() + ":/usr/local/cuda/bin";
  CommandResult listed = make_process_runner()->run(c);
  if (listed.ok())
    CHECK(listed.out.find("sm_90a") != std::string::npos);
  else  // no cuobjdump: the device link line nvcc embeds names the arch
    CHECK(test::read_text(r[0].so_path).find("-arch sm_90a") != std::string::npos);
}

// The CUDA half of test_compile.cpp's "every shipped template's first instance":
// the static check runs there (unit tier), the compile here.
TEST_CASE("every shipped CUDA template's first instance compiles for sm_90a") {
  World w;
  if (w.ctx->toolchain.nvcc.empty()) {
    MESSAGE(
        "SKIPPED (no nvcc on this machine): " << doctest::getContextOptions()->currentTest->m_name);
    return;
  }
  const auto cuda = test::first_instances(CandidateLang::Cuda);
  REQUIRE(cuda.size() >= 10);
  auto rs = w.compile(cuda, {.cuda_arch = "sm_90a"});
  for (size_t i = 0; i < rs.size(); ++i) CHECK_MESSAGE(rs[i].ok, cuda[i].name << ": " << rs[i].log);
}

// The chain generator's CUDA instance (rules/search/chain_strategies.h) on a
// chain of every input mode: silu(batch_norm(x)) * b + 0.5, the batch norm's
// parameters per channel, b broadcast per row, 0.5 a
// Python number, in bfloat16.
TEST_CASE("a generated fused chain compiles for sm_90a") {
  World w;
  if (w.ctx->toolchain.nvcc.empty()) {
    MESSAGE(
        "SKIPPED (no nvcc on this machine): " << doctest::getContextOptions()->currentTest->m_name);
    return;
  }
  using nlohmann::json;
  auto tensor = [](std::vector<int64_t> sizes, const char* dtype, json ref) {
    std::vector<int64_t> strides(sizes.size(), 1);
    for (size_t d = sizes.size(); d-- > 1;) strides[d - 1] = strides[d] * sizes[d];
    return json{{"type", "Tensor"}, {"dtype", dtype}, {"sizes", sizes}, {"strides", strides}, {"device", "cpu"},
                {"ref", ref}};
  };
  const json x = tensor({64, 256}, "bfloat16", {{"input", 0}}), b = tensor({64, 1}, "bfloat16", {{"input", 1}});
  const json half = tensor({}, "float64", {{"input", 2}});
  auto channel = [&](int k) { return tensor({256}, "float32", {{"input", k}}); };
  auto out = [&](int op) { return tensor({64, 256}, "bfloat16", {{"op", op}, {"output", 0}}); };
  Target t;
  t.args = json::array({x, b, half, channel(3), channel(4), channel(5), channel(6)});
  t.outputs = json::array({out(0)});
  // batch_norm (eval) -> silu -> mul -> add: the batch norm's parameters per channel.
  t.chain = {{"inputs", 7},
             {"outputs", 1},
             {"ops", {{{"op", "aten::native_batch_norm"}, {"overload", ""},
                       {"args", {x, channel(3), channel(4), channel(5), channel(6), {{"type", "bool"}, {"value", false}},
                                 {{"type", "float"}, {"value", 0.1}}, {{"type", "float"}, {"value", 1e-5}}}}},
                      {{"op", "aten::silu"}, {"overload", ""}, {"args", {out(0)}}},
                      {{"op", "aten::mul"}, {"overload", "Tensor"}, {"args", {out(1), b}}},
                      {{"op", "aten::add"}, {"overload", "Tensor"}, {"args", {out(2), half, {{"type", "int"}, {"value", 1}}}}}}}};
  const auto generated = chain_strategies(t);
  REQUIRE_MESSAGE(generated.strategies.size() == 2, generated.why);
  const Strategy& cuda = generated.strategies[1];
  std::vector<CandidateSource> sources;
  for (const auto& p : param_grid(cuda))
    if (p["BLOCK"] == 256) sources.push_back({"chain-VEC" + p["VEC"].dump() + ".cu", instantiate(cuda, p), CandidateLang::Cuda});
  auto rs = w.compile(sources, {.cuda_arch = "sm_90a"});
  for (size_t i = 0; i < rs.size(); ++i) CHECK_MESSAGE(rs[i].ok, sources[i].name << ": " << rs[i].log);
}

// A group norm head (chain_strategies.h, head_definition): group_norm -> SiLU
// in bfloat16 through the group_norm family's CUDA templates, SiLU fused into their store.
TEST_CASE("group norm -> SiLU, an RMSNorm spelled as ops and a reduction chain compile in their CUDA templates for sm_90a") {
  World w;
  if (w.ctx->toolchain.nvcc.empty()) {
    MESSAGE(
        "SKIPPED (no nvcc on this machine): " << doctest::getContextOptions()->currentTest->m_name);
    return;
  }
  using nlohmann::json;
  auto tensor = [](std::vector<int64_t> sizes, json ref) {
    std::vector<int64_t> strides(sizes.size(), 1);
    for (size_t d = sizes.size(); d-- > 1;) strides[d - 1] = strides[d] * sizes[d];
    return json{{"type", "Tensor"}, {"dtype", "bfloat16"}, {"sizes", sizes}, {"strides", strides},
                {"device", "cuda"}, {"ref", ref}};
  };
  auto integer = [](int v) { return json{{"type", "int"}, {"value", v}}; };
  const json x = tensor({2, 64, 32, 32}, {{"input", 0}});
  Target t;
  t.args = json::array({x, tensor({64}, {{"input", 1}}), tensor({64}, {{"input", 2}})});
  t.outputs = json::array({tensor({2, 64, 32, 32}, nullptr)});
  t.chain = {{"inputs", 3},
             {"outputs", 1},
             {"ops", {{{"op", "aten::native_group_norm"},
                       {"overload", ""},
                       {"args", {x, t.args[1], t.args[2], integer(2), integer(64), integer(1024), integer(32),
                                 {{"type", "float"}, {"value", 1e-6}}}}},
                      {{"op", "aten::silu"}, {"overload", ""}, {"args", {tensor({2, 64, 32, 32}, {{"op", 0}, {"output", 0}})}}}}}};
  const auto generated = chain_strategies(t);
  std::vector<CandidateSource> sources;
  for (const auto& s : generated.strategies)
    if (s.backend == "cuda") sources.push_back({s.name + ".cu", instantiate(s, param_grid(s).front()), CandidateLang::Cuda});
  REQUIRE_MESSAGE(sources.size() == 3, generated.why);  // warp_group, block_group, split_group
  // And an RMSNorm spelled as ops (rms_definition), bf16 rows of 4096, in the rms_norm CUDA template.
  auto any = [&](std::vector<int64_t> sizes, const char* dtype, json ref) {
    json r = tensor(sizes, ref);
    r["dtype"] = dtype;
    return r;
  };
  const json rx = any({4, 4096}, "bfloat16", {{"input", 0}});
  json eps = any({}, "float64", {{"input", 1}});
  eps["device"] = "cpu";
  auto out = [&](int op, std::vector<int64_t> sizes) { return any(sizes, "bfloat16", {{"op", op}, {"output", 0}}); };
  Target r;
  r.args = json::array({rx, eps, any({4096}, "bfloat16", {{"input", 2}})});
  r.outputs = json::array({any({4, 4096}, "bfloat16", nullptr)});
  const json dims = {{"type", "list"}, {"value", json::array({json{{"type", "int"}, {"value", -1}}})}};
  r.chain = {{"inputs", 3},
             {"outputs", 1},
             {"ops", {{{"op", "aten::pow"}, {"overload", "Tensor_Scalar"}, {"args", {rx, integer(2)}}},
                      {{"op", "aten::mean"}, {"overload", "dim"},
                       {"args", {out(0, {4, 4096}), dims, {{"type", "bool"}, {"value", true}}, {{"type", "None"}}}}},
                      {{"op", "aten::add"}, {"overload", "Tensor"}, {"args", {out(1, {4, 1}), eps, integer(1)}}},
                      {{"op", "aten::rsqrt"}, {"overload", ""}, {"args", {out(2, {4, 1})}}},
                      {{"op", "aten::mul"}, {"overload", "Tensor"}, {"args", {rx, out(3, {4, 1})}}},
                      {{"op", "aten::mul"}, {"overload", "Tensor"}, {"args", {r.args[2], out(4, {4, 4096})}}}}}};
  const auto rms = chain_strategies(r);
  for (const auto& s : rms.strategies)
    if (s.backend == "cuda") sources.push_back({s.name + ".cu", instantiate(s, param_grid(s).front()), CandidateLang::Cuda});
  REQUIRE_MESSAGE(sources.size() == 4, rms.why);
  // And a reduction among pointwise ops (reduce_definition): x / amax(|x|, 0,
  // keepdim) on bf16 [64, 96], a column reduction, in the reduce_pointwise template.
  Target m;
  const json mx = any({64, 96}, "bfloat16", {{"input", 0}});
  m.args = json::array({mx});
  m.outputs = json::array({any({64, 96}, "bfloat16", nullptr)});
  const json dim0 = {{"type", "list"}, {"value", json::array({json{{"type", "int"}, {"value", 0}}})}};
  m.chain = {{"inputs", 1},
             {"outputs", 1},
             {"ops", {{{"op", "aten::abs"}, {"overload", ""}, {"args", {mx}}},
                      {{"op", "aten::amax"}, {"overload", ""}, {"args", {out(0, {64, 96}), dim0, {{"type", "bool"}, {"value", true}}}}},
                      {{"op", "aten::div"}, {"overload", "Tensor"}, {"args", {mx, out(1, {1, 96})}}}}}};
  const auto red = chain_strategies(m);
  for (const auto& s : red.strategies)
    if (s.backend == "cuda") sources.push_back({s.name + ".cu", instantiate(s, param_grid(s).front()), CandidateLang::Cuda});
  REQUIRE_MESSAGE(sources.size() == 5, red.why);
  // And attention scores (softmax in reduce_definition): softmax(x * scale +
  // mask) in float32, cast back to bf16, x [2, 8, 64, 1024] (rows held in
  // registers), mask [2, 1, 64, 1024]. The template's other paths (long rows,
  // columns, log_softmax) are `if constexpr` outside templates: compiled here too.
  auto softmax = [&](const char* op, std::vector<int64_t> sizes, bool cast) {
    std::vector<int64_t> msizes = sizes;
    msizes[1] = 1;
    const json sx = any(sizes, "bfloat16", {{"input", 0}}), mask = any(msizes, "bfloat16", {{"input", 2}});
    json scale = any({}, "float64", {{"input", 1}});
    scale["device"] = "cpu";
    auto f32 = [&](int op, std::vector<int64_t> s) { return any(s, "float32", {{"op", op}, {"output", 0}}); };
    Target a;
    a.args = json::array({sx, scale, mask});
    a.outputs = json::array({any(sizes, cast ? "bfloat16" : "float32", nullptr)});
    const json to32 = {{"type", "ScalarType"}, {"value", "float32"}}, to16 = {{"type", "ScalarType"}, {"value", "bfloat16"}};
    json ops = {{{"op", "aten::mul"}, {"overload", "Tensor"}, {"args", {sx, scale}}},
                {{"op", "aten::add"}, {"overload", "Tensor"}, {"args", {out(0, sizes), mask, integer(1)}}},
                {{"op", "aten::_to_copy"}, {"overload", ""}, {"args", {out(1, sizes), to32}}},
                {{"op", op}, {"overload", ""}, {"args", {f32(2, sizes), integer(-1), {{"type", "bool"}, {"value", false}}}}}};
    if (cast) ops.push_back({{"op", "aten::_to_copy"}, {"overload", ""}, {"args", {f32(3, sizes), to16}}});
    a.chain = {{"inputs", 3}, {"outputs", 1}, {"ops", ops}};
    const auto got = chain_strategies(a);
    for (const auto& s : got.strategies)
      if (s.backend == "cuda") sources.push_back({s.name + ".cu", instantiate(s, param_grid(s).front()), CandidateLang::Cuda});
    return got.why;
  };
  const std::string held = softmax("aten::_softmax", {2, 8, 64, 1024}, true);
  REQUIRE_MESSAGE(sources.size() == 6, held);
  auto rs = w.compile(sources, {.cuda_arch = "sm_90a"});
  for (size_t i = 0; i < rs.size(); ++i) CHECK_MESSAGE(rs[i].ok, sources[i].name << ": " << rs[i].log);
}

// add bias -> sigmoid -> GroupNorm -> mul (norm_definition) in the
// group_norm_prologue template, float32: a GEMM's [4096, 256] in 4 groups
// (HxW 1, 64-element slices: a warp per slice) and [2, 8, 64, 64] (slices
// of 8192: a block per slice).
TEST_CASE("pointwise ops before a group norm compile in the group_norm_prologue CUDA template at small and large slices") {
  World w;
  if (w.ctx->toolchain.nvcc.empty()) {
    MESSAGE(
        "SKIPPED (no nvcc on this machine): " << doctest::getContextOptions()->currentTest->m_name);
    return;
  }
  using nlohmann::json;
  auto tensor = [](std::vector<int64_t> sizes, json ref, const char* dtype = "float32", const char* device = "cuda") {
    std::vector<int64_t> strides(sizes.size(), 1);
    for (size_t d = sizes.size(); d-- > 1;) strides[d - 1] = strides[d] * sizes[d];
    return json{{"type", "Tensor"}, {"dtype", dtype}, {"sizes", sizes}, {"strides", strides},
                {"device", device}, {"ref", ref}};
  };
  auto integer = [](int64_t v) { return json{{"type", "int"}, {"value", v}}; };
  std::vector<CandidateSource> sources;
  for (const auto& sizes : {std::vector<int64_t>{4096, 256}, std::vector<int64_t>{2, 8, 64, 64}}) {
    const int64_t C = sizes[1], HW = sizes.size() > 2 ? sizes[2] * sizes[3] : 1;
    std::vector<int64_t> per_channel(sizes.size() - 1, 1);
    per_channel[0] = C;
    auto out = [&](int op) { return tensor(sizes, {{"op", op}, {"output", 0}}); };
    Target t;
    t.args = json::array({tensor(sizes, {{"input", 0}}), tensor(per_channel, {{"input", 1}}),
                          tensor({C}, {{"input", 2}}), tensor({C}, {{"input", 3}}),
                          tensor({}, {{"input", 4}}, "float64", "cpu")});
    t.outputs = json::array({tensor(sizes, nullptr)});
    t.chain = {{"inputs", 5},
               {"outputs", 1},
               {"ops",
                {{{"op", "aten::add"}, {"overload", "Tensor"}, {"args", {t.args[0], t.args[1], integer(1)}}},
                 {{"op", "aten::sigmoid"}, {"overload", ""}, {"args", {out(0)}}},
                 {{"op", "aten::native_group_norm"},
                  {"overload", ""},
                  {"args", {out(1), t.args[2], t.args[3], integer(sizes[0]), integer(C), integer(HW), integer(4),
                            {{"type", "float"}, {"value", 1e-5}}}}},
                 {{"op", "aten::mul"}, {"overload", "Tensor"}, {"args", {out(2), t.args[4]}}}}}};
    const auto got = chain_strategies(t);
    for (const auto& s : got.strategies) {
      if (s.backend != "cuda") continue;
      json first = param_grid(s).front();
      sources.push_back({s.name + ".cu", instantiate(s, first), CandidateLang::Cuda});
      if (sizes.size() == 2) continue;
      first["ONE_PASS"] = 1;  // the large slice's moments in one read too
      sources.push_back({s.name + "_one_pass.cu", instantiate(s, first), CandidateLang::Cuda});
    }
    REQUIRE_MESSAGE(sources.size() == (sizes.size() == 2 ? 1u : 3u), got.why);
  }
  auto rs = w.compile(sources, {.cuda_arch = "sm_90a"});
  for (size_t i = 0; i < rs.size(); ++i) CHECK_MESSAGE(rs[i].ok, sources[i].name << ": " << rs[i].log);
}

TEST_SUITE_END();
}  // namespace forge
