// "llm" actions in the MCTS tree beside strategy actions, the prompts and
// what they are made of (device facts, the trimmed library example).
#include <doctest/doctest.h>

#include <array>
#include <filesystem>

#include "engine/device_facts.h"
#include "rules/evaluate/family.h"
#include "rules/llm/prompt.h"
#include "rules/llm/proposer.h"
#include "rules/search/strategies.h"
#include "tests/support.h"
#include "util/atomic_file.h"
#include "util/process.h"

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
  ok.steps = {{"evaluation", "eval-a"}, {"source", "src-a"}};
  search.complete(a, ok);
  mcts::NodeId m = search.begin_expansion({mcts::kRoot, root[1]});
  mcts::Outcome bad;
  bad.status = mcts::Outcome::Status::CompileError;
  bad.reason = "compile_error: expected ';'";
  bad.steps = {{"idea", "Two passes with an online max."}};
  search.complete(m, bad);

  // The note is JSON: what was tried (with the model's idea), the fastest
  // kernels off the path, and where stock's benchmark figure is.
  auto under_a = model.actions(tree, a, rng);
  REQUIRE(under_a.size() == 2);
  json note = json::parse(under_a[0].parent_note);
  CHECK(note["tried"] == "- ancestor node 1, strategy a {\"X\":1}: ok 1.5x stock\n");
  CHECK_FALSE(note.contains("elsewhere"));  // node 2 failed; node 1 is the parent
  CHECK(note["stock_evaluation"] == "eval-a");
  CHECK(note["stock_node"] == 1);
  auto under_root = model.actions(tree, mcts::kRoot, rng);
  note = json::parse(under_root[0].parent_note);
  CHECK(note["tried"] ==
        "- tried from here, node 1, strategy a {\"X\":1}: ok 1.5x stock\n"
        "- tried from here, node 2, model variant 1 (from scratch): compile_error: "
        "compile_error: expected ';'; idea: Two passes with an online max.\n");
  CHECK(note["elsewhere"] == "- node 1, strategy a {\"X\":1}: ok 1.5x stock\n");
  CHECK(note["elsewhere_source"] == "src-a");  // 1.5x beats the root's stock
  CHECK(note["elsewhere_what"] == "node 1, strategy a {\"X\":1}");
  // Nothing is asked under a kernel that failed.
  CHECK(model.actions(tree, m, rng).empty());
  // The search skips what was tried: next under the root is strategy b.
  CHECK(search.propose(mcts::kRoot)->strategy == "b");
}

namespace {

llm::PromptFacts child_facts() {
  llm::PromptFacts f;
  f.op = "_softmax";
  f.signature = "_softmax(f32[64,1000]{1000,1}, -1, False)";
  f.family = "targets/softmax/family.yaml";
  f.args = "[]";
  f.outputs = "[]";
  f.family_yaml = "# softmax along the last dimension\nname: softmax\n";
  f.abi_header = "/* file comment */\ntypedef struct forge_call {} forge_call;";
  f.device_name = "Test CPU";
  f.arch = "x86_64";
  f.device_facts = "2 logical CPUs; ISA extensions: avx2 avx512f; caches (cpu0): L1d 32 KiB.";
  f.ceiling_bytes_per_s = 2e10;
  f.bytes = 512000;
  f.floor_us = 25.6;
  f.capture_us = 714;
  f.stock = llm::Timing{80, 2};
  f.stock_from = "the parent's evaluation";
  f.stock_threads = 1;
  f.parent_what = "strategy rows_3pass {\"ISA\":0}";
  f.parent_source = "int forge_kernel(const forge_call* c) { return 0; }\n";
  f.parent = llm::Timing{40, 1.2};
  f.parent_speedup = 2;
  f.parent_floor_pct = 64;
  f.parent_hot_speedup = 1.8;
  f.history = "- ancestor node 1: ok 2x stock\n"
              "- tried from here, node 3, model variant 1 of node 1: wrong_result; idea: Skip the max.\n";
  f.elsewhere = "- node 5, strategy online_2pass {\"ISA\":3}: ok 2.5x stock\n";
  f.elsewhere_what = "node 5, strategy online_2pass {\"ISA\":3}";
  f.elsewhere_source = "// the faster one\n";
  f.variant = 1;
  f.variants = 3;
  return f;
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("the variant prompt: device facts, timing and reward, spreads, ideas, elsewhere") {
  auto t = llm::load_prompt_templates(llm::default_prompts_dir());
  llm::Request r = llm::variant_request(t, child_facts());
  CHECK(r.variant == 1);
  CHECK(has(r.system, "typedef struct forge_call {} forge_call;"));
  CHECK_FALSE(has(r.system, "file comment"));
  CHECK(has(r.system, "```cpp"));
  // How the benchmark times and what the reward and the shipping rule are.
  for (const char* part : {"flushes the caches (a memset of max(64 MiB, 2 x LLC))", "cold calls",
                           "in random order", "interquartile range (IQR)",
                           "ln(stock median / your median)", "by at least 5% (sign test, p < 0.05)",
                           "beats the kernel shipped now", "at least 5% lower",
                           "reported, not judged"}) {
    CAPTURE(part);
    CHECK(has(r.system, part));
  }
  REQUIRE(r.messages.size() == 1);
  const std::string& u = r.messages[0].text;
  for (const char* part :
       {"aten::_softmax", "f32[64,1000]", "# softmax along the last dimension",
        "CPU: Test CPU (x86_64). 2 logical CPUs; ISA extensions: avx2 avx512f; caches (cpu0): L1d 32 KiB.",
        "20 GB/s", "bandwidth floor 25.6 us",
        "Stock, as the benchmark measures it (the parent's evaluation): 80 ± 2 us per cold call, on 1 thread.",
        "Measured: 40 ± 1.2 us (median ± IQR, cold), 2x stock, 64% of the bandwidth floor; hot 1.8x stock.",
        "int forge_kernel(const forge_call* c) { return 0; }", "- ancestor node 1: ok 2x stock",
        "wrong_result; idea: Skip the max.", "Fastest elsewhere in this tree:",
        "- node 5, strategy online_2pass", "node 5, strategy online_2pass {\"ISA\":3}, beats your parent",
        "// the faster one", "variant 2 of 3"}) {
    CAPTURE(part);
    CHECK(has(u, part));
  }
  CHECK_FALSE(has(u, "during capture"));  // the benchmark's stock figure is known
  CHECK(u.find("{{") == std::string::npos);

  // Without a benchmark figure, the capture's time, labelled as such.
  llm::PromptFacts f = child_facts();
  f.stock.reset();
  const std::string capture = llm::variant_request(t, f).messages[0].text;
  CHECK(has(capture, "Stock took 714 us per call during capture"));
  CHECK_FALSE(has(capture, "as the benchmark measures it"));

  llm::Request fix = llm::repair_request(t, r, "my reply", "It does not compile:",
                                         std::string(10000, 'e'), 600);
  REQUIRE(fix.messages.size() == 3);
  CHECK(fix.messages[1].role == "assistant");
  CHECK(fix.messages[1].text == "my reply");
  CHECK(fix.messages[2].text.find("It does not compile:") == 0);
  CHECK(fix.messages[2].text.find("characters left out") != std::string::npos);
  CHECK(fix.messages[2].text.size() < 1200);
}

TEST_CASE("only the target backend's static rules and launch words") {
  auto t = llm::load_prompt_templates(llm::default_prompts_dir());
  llm::PromptFacts f = child_facts();
  llm::Request cpu = llm::variant_request(t, f);
  CHECK(has(cpu.system, "`thread`"));
  CHECK(has(cpu.system, "`inline_asm`"));
  for (const char* cuda_only : {"`stream`", "`default_stream`", "call->stream", "cudaMemsetAsync"}) {
    CAPTURE(cuda_only);
    CHECK_FALSE(has(cpu.system + cpu.messages[0].text, cuda_only));
  }
  f.cuda = true;
  llm::Request gpu = llm::variant_request(t, f);
  CHECK(has(gpu.system, "`stream`"));
  CHECK(has(gpu.system, "`default_stream`"));
  CHECK_FALSE(has(gpu.system, "`inline_asm`"));
  CHECK(has(gpu.messages[0].text, "Launch on (cudaStream_t)call->stream."));
  CHECK(has(gpu.system, "cudaMemsetAsync of max(256 MiB, 2 x L2)"));
}

TEST_CASE("device facts: CPU from cpuinfo and the cache folders, CUDA from the property query") {
  test::TempDir dir;
  const std::vector<std::array<const char*, 3>> caches = {
      {"1", "Data", "32K"}, {"1", "Instruction", "32K"}, {"2", "Unified", "1024K"}, {"3", "Unified", "32768K"}};
  for (size_t i = 0; i < caches.size(); ++i) {
    const auto d = dir / ("index" + std::to_string(i));
    std::filesystem::create_directories(d);
    test::write_text(d / "level", std::string(caches[i][0]) + "\n");
    test::write_text(d / "type", std::string(caches[i][1]) + "\n");
    test::write_text(d / "size", std::string(caches[i][2]) + "\n");
  }
  DeviceFacts cpu = cpu_device_facts(
      "processor\t: 0\nflags\t\t: fpu sse4_2 avx avx2 fma avx512f avx512bw avx512_bf16 amx_tile\n"
      "processor\t: 1\nflags\t\t: fpu\n",
      dir.path(), 2);
  CHECK(cpu.isa == std::vector<std::string>{"sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw",
                                            "avx512_bf16", "amx_tile"});
  CHECK(cpu.describe() ==
        "2 logical CPUs; ISA extensions: sse4_2 avx avx2 fma avx512f avx512bw avx512_bf16 amx_tile; "
        "caches (cpu0): L1d 32 KiB, L2 1 MiB, L3 32 MiB.");
  // Nothing readable: nothing said.
  CHECK(cpu_device_facts("", dir / "absent", 0).describe() == "");

  DeviceFacts gpu = cuda_device_facts(json{{"multi_processor_count", 132},
                                           {"L2_cache_size", 52428800},
                                           {"shared_memory_per_block", 49152},
                                           {"shared_memory_per_block_optin", 232448},
                                           {"shared_memory_per_multiprocessor", 233472},
                                           {"warp_size", 32}});
  CHECK(gpu.describe() ==
        "132 SMs; warp size 32; L2 50 MiB; shared memory 48 KiB per block (227 KiB opt-in), "
        "228 KiB per SM.");
}

TEST_CASE("the root prompt for CPU _softmax float32[4,4,128,128]: trimmed example, its size") {
  auto t = llm::load_prompt_templates(llm::default_prompts_dir());
  std::optional<Strategy> rows;
  for (const auto& fam : load_families(default_targets_dir()))
    if (fam.name == "softmax")
      for (const auto& s : load_strategies(fam))
        if (s.name == "rows_3pass") rows = s;
  REQUIRE(rows);
  // As the search instantiates the root's example: the first parameters, no facts.
  const std::string example = instantiate(*rows, param_grid(*rows).front());
  const std::vector<std::string> isa = {"sse4_2", "avx", "avx2", "fma", "f16c", "bmi2",
                                        "avx512f", "avx512dq", "avx512cd", "avx512bw", "avx512vl"};
  const std::string trimmed = llm::trim_example(example, /*float32*/ 1, isa);
  MESSAGE("library example: " << example.size() << " characters, trimmed " << trimmed.size());
  CHECK(trimmed.size() * 2 < example.size());
  CHECK(has(trimmed, "softmax, CPU strategy \"rows_3pass\""));  // the summary comment
  CHECK(has(trimmed, "extern \"C\" int forge_kernel(const forge_call* call)"));
  CHECK(has(trimmed, "case FORGE_FLOAT32"));
  for (const char* gone : {"case FORGE_BFLOAT16", "load(const bf16*", "store(f16*", "FORGE_DTYPES",
                           "#if FORGE_P_ISA", "_mm256_cvtph_ps", "host_affine_ok", "Math:"}) {
    CAPTURE(gone);
    CHECK_FALSE(has(trimmed, gone));
  }
  // Without known dtypes or ISA nothing is guessed: the 16-bit paths stay.
  CHECK(has(llm::trim_example(example, 0, {}), "load(const bf16*"));
  // It still compiles (for float32, on a CPU with those extensions).
  {
    test::TempDir dir;
    test::write_text(dir / "k.cpp", trimmed);
    const std::string abi = (default_targets_dir().parent_path() / "runtime" / "abi").string();
    auto runner = make_process_runner();
    Command c;
    c.argv = {"c++", "-std=c++17", "-fsyntax-only", "-mavx512f", "-mavx512bw", "-mavx512dq",
              "-mavx512vl", "-mavx2", "-mfma", "-mf16c", "-I", abi, (dir / "k.cpp").string()};
    CommandResult res = runner->run(c);
    INFO(res.err);
    CHECK(res.ok());
  }

  llm::PromptFacts f;
  f.op = "_softmax";
  f.signature = "_softmax(f32[4,4,128,128]{65536,16384,128,1}, -1, False)";
  f.family = "targets/softmax/family.yaml";
  f.args = "[\n {\"device\":\"cpu\",\"dtype\":\"float32\",\"name\":\"self\",\"sizes\":[4,4,128,128],"
           "\"strides\":[65536,16384,128,1],\"type\":\"Tensor\"},\n {\"name\":\"dim\",\"type\":\"int\","
           "\"value\":-1},\n {\"name\":\"half_to_float\",\"type\":\"bool\",\"value\":false}\n]\n";
  f.outputs = "[\n {\"device\":\"cpu\",\"dtype\":\"float32\",\"sizes\":[4,4,128,128],"
              "\"strides\":[65536,16384,128,1],\"type\":\"Tensor\"}\n]\n";
  f.dtypes = 1;
  REQUIRE(read_file(default_targets_dir() / "softmax" / "family.yaml", &f.family_yaml));
  REQUIRE(read_file(default_targets_dir().parent_path() / "runtime" / "abi" / "forge_kernel.h",
                    &f.abi_header));
  f.device_name = "AMD EPYC 9R14 96-Core Processor";
  f.arch = "x86_64";
  f.isa = isa;
  f.device_facts = "2 logical CPUs; ISA extensions: avx2 fma avx512f avx512bw avx512_bf16; "
                   "caches (cpu0): L1d 32 KiB, L2 1 MiB, L3 32 MiB.";
  f.ceiling_bytes_per_s = 2e10;
  f.bytes = 2097152;
  f.floor_us = 104.9;
  f.capture_us = 714;
  f.parent_what = "the stock kernel";
  f.example_source = example;
  llm::Request r = llm::variant_request(t, f);
  const size_t chars = r.system.size() + r.messages[0].text.size();
  MESSAGE("root prompt: " << chars << " characters (system " << r.system.size() << ")");
  // 31,159 before the prompts were trimmed; 15.4K until the softmax family
  // took _log_softmax too (its family text and the template's log branch).
  CHECK(chars < 16500);
  const std::string& u = r.messages[0].text;
  CHECK(has(u, trimmed));
  CHECK(has(u, "float32: {atol: 1.0e-6, rtol: 1.0e-5}"));
  CHECK_FALSE(has(u, "bfloat16: {atol"));         // other dtypes' tolerances
  CHECK_FALSE(has(u, "# Accuracy against float64"));  // the family's interior comments
}

TEST_CASE("a template placeholder without a value is an error") {
  CHECK(llm::render("a {{x}} b", {{"x", "1"}}) == "a 1 b");
  CHECK(llm::render("{{x}}", {{"x", "{{y}}"}}) == "{{y}}");  // values are not re-read
  CHECK_THROWS_WITH(llm::render("a {{nope}}", {}), "prompt template: no value for {{nope}}");
}

TEST_SUITE_END();
}  // namespace forge
