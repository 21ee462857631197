// forge build with the model as the only proposer, on the CPU backend: the
// `command` provider is a script that reads the prompt and answers with
// layer_norm's two-pass library kernel in a fence. The kernel must verify, the
// report must name the llm proposer and count the request, and a rebuild must
// replay without asking again. Skipped (visibly) where torch is not importable.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tests/support.h"

namespace forge {
namespace fs = std::filesystem;
using nlohmann::json;

TEST_SUITE_BEGIN("rules::LlmBuild");

namespace {

bool tree_contains(const fs::path& root, const std::string& needle) {
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (!e.is_regular_file()) continue;
    std::ifstream in(e.path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    if (ss.str().find(needle) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

// Two variants under the root, asked together: the script takes a second per
// reply and logs when each request starts and ends, so the log shows them in
// flight at once. Variant 2's first request fails ("model busy"): that costs its
// own action (the build reports it and exits nonzero, variant 1 is evaluated),
// and the next build asks for it again and finishes the budget.
TEST_CASE("forge build with the command provider: variants asked together, a failed request retried") {
  const fs::path repo = fs::path(FORGE_TEST_DIR).parent_path();
  FORGE_SKIP_WITHOUT_TORCH();
  const std::string key = "sk-PLANTED-build-key-5150";
  ::setenv("FORGE_TEST_PLANTED_KEY", key.c_str(), 1);
  test::TempDir dir;
  fs::copy_file(repo / "examples" / "tiny" / "transformer.py", dir / "transformer.py");
  test::write_text(dir / "kernel.cpp", test::library_kernel("layer_norm", "two_pass"));
  test::write_text(dir / "model.sh",
                   "#!/bin/sh\nv=$FORGE_LLM_VARIANT\ncat > prompt-$v.txt\n"
                   "echo \"start $v $(date +%s.%N)\" >> times.txt\nsleep 1\n"
                   "echo \"end $v $(date +%s.%N)\" >> times.txt\n"
                   "if [ \"$v\" = 2 ] && [ ! -e busy-once ]; then touch busy-once; echo 'model busy' >&2; exit 3; fi\n"
                   "echo 'Two passes per row.'\necho '```cpp'\ncat kernel.cpp\necho '```'\n");
  test::write_text(dir / "forge.yaml",
                   "models:\n  transformer: {run: python transformer.py, check_runs: 1}\n"
                   "targets: {ops: [native_layer_norm], top: 1, min_share: 0}\n"
                   "budget: {iterations: 2}\n"
                   "proposer:\n  strategies: false\n"
                   "  llm: {provider: command, command: sh model.sh, variants: 2}\n");

  auto first = test::run_forge("--json build", dir.path());
  INFO(first.err);
  CHECK(first.exit_code != 0);  // one action short: not complete
  json r = json::parse(first.out);
  REQUIRE(r["targets"].size() == 1);
  const json& t = r["targets"][0];
  INFO(t.dump());
  CHECK(t["iterations"] == 1);
  CHECK(t["verified"] == 1);
  if (t["accepted"] == 1) {
    CHECK(t["best_proposer"] == "llm");
    CHECK(t["best_strategy"] == "llm variant 1");
  } else {
    MESSAGE("the llm kernel verified but was not faster here: " << t["outcomes"].dump());
  }
  CHECK(t["llm"]["provider"] == "command");
  CHECK(t["llm"]["requests"] == 1);  // answered; the failed one is in the notes
  CHECK(r["llm"]["requests"] == 1);
  CHECK(r["llm"]["cost_usd"].is_null());
  CHECK(r["llm"]["prompt_chars"]["largest"].get<long>() > 1000);
  bool reported = false;
  for (const auto& n : r["notes"])
    if (n.get<std::string>().find("skipped") != std::string::npos &&
        n.get<std::string>().find("model variant 2 (from scratch)") != std::string::npos &&
        n.get<std::string>().find("model busy") != std::string::npos)
      reported = true;
  CHECK_MESSAGE(reported, r["notes"].dump());

  // Both requests were in flight at once: variant 2 started before 1 ended.
  std::map<std::string, double> at;
  std::istringstream log(test::read_text(dir / "times.txt"));
  for (std::string what, v; log >> what >> v;) log >> at[what + v];
  REQUIRE(at.count("start2"));
  CHECK(at["start2"] < at["end1"]);

  // The prompt the script saw: the op's semantics, the ABI, the rules, the device.
  const std::string prompt = test::read_text(dir / "prompt-1.txt");
  for (const char* part : {"aten::native_layer_norm", "# layer_norm", "FORGE_ABI_VERSION",
                           "`thread`", "CPU: ", "From scratch", "ln(stock median / your median)"}) {
    CAPTURE(part);
    CHECK(prompt.find(part) != std::string::npos);
  }

  // The next build asks for variant 2 again and completes the budget.
  auto retry = test::run_forge("--json build", dir.path());
  INFO(retry.err);
  REQUIRE(retry.exit_code == 0);
  json r1 = json::parse(retry.out);
  CHECK(r1["targets"][0]["iterations"] == 2);
  CHECK(r1["targets"][0]["verified"] == 2);
  CHECK(r1["targets"][0]["llm"]["requests"] == 1);

  // Unchanged: the journal replays, nothing is asked or evaluated.
  fs::remove(dir / "prompt-1.txt");
  fs::remove(dir / "prompt-2.txt");
  auto again = test::run_forge("--json build", dir.path());
  REQUIRE(again.exit_code == 0);
  json r2 = json::parse(again.out);
  CHECK(r2["steps_run"] == 0);
  CHECK(r2["targets"][0]["verified"] == 2);
  CHECK(r2["targets"][0]["llm"]["requests"] == 0);
  CHECK_FALSE(fs::exists(dir / "prompt-1.txt"));
  CHECK_FALSE(fs::exists(dir / "prompt-2.txt"));

  CHECK_FALSE(tree_contains(dir.path(), key));
  CHECK(first.out.find(key) == std::string::npos);
  CHECK(first.err.find(key) == std::string::npos);
}

// proposer.llm.chains: the model proposes for chain targets too. A Swish
// module's chain (sigmoid, mul), the library off: the script answers with a
// hand-written kernel for the chain's call (x in, y out), which verifies
// against the stock chain; the prompt names the chain's op and its ATen ops.
TEST_CASE("forge build asks the model for a chain's kernel where proposer.llm.chains is on") {
  FORGE_SKIP_WITHOUT_TORCH();
  test::TempDir dir;
  test::write_text(dir / "model.py",
                   "import torch\n"
                   "class Swish(torch.nn.Module):\n"
                   "    def forward(self, x):\n"
                   "        return x * torch.sigmoid(x)\n"
                   "x = torch.randn(64, 4096)\n"
                   "with torch.no_grad():\n"
                   "    for _ in range(3):\n"
                   "        y = Swish()(x)\n"
                   "print(float(y.sum()))\n");
  test::write_text(dir / "kernel.cpp", R"(#include <cmath>
#include <cstdint>
#include "forge_kernel.h"
extern "C" int forge_kernel(const forge_call* call) {
  if (!call || call->n_inputs != 1 || call->n_outputs != 1) return 1;
  const forge_tensor& x = call->inputs[0];
  const forge_tensor& y = call->outputs[0];
  if (x.dtype != FORGE_FLOAT32 || y.dtype != FORGE_FLOAT32 || x.ndim != y.ndim) return 1;
  int64_t n = 1, expect = 1;
  for (int d = x.ndim - 1; d >= 0; --d) {
    if (x.sizes[d] != y.sizes[d]) return 1;
    if (x.sizes[d] != 1 && (x.strides[d] != expect || y.strides[d] != expect)) return 1;
    expect *= x.sizes[d];
    n *= x.sizes[d];
  }
  const float* in = static_cast<const float*>(x.data);
  float* out = static_cast<float*>(y.data);
  for (int64_t i = 0; i < n; ++i) out[i] = in[i] / (1.0f + std::exp(-in[i]));
  return 0;
}
)");
  test::write_text(dir / "model.sh",
                   "#!/bin/sh\ncat > prompt-$FORGE_LLM_VARIANT.txt\n"
                   "echo 'x times its sigmoid in one pass.'\necho '```cpp'\ncat kernel.cpp\necho '```'\n");
  test::write_text(dir / "forge.yaml",
                   "models:\n  m: {run: python model.py, env: {OMP_NUM_THREADS: '1'}, check_runs: 1}\n"
                   "targets: {ops: [native_layer_norm], top: 1, min_share: 0}\n"  // no single op: the chain alone
                   "budget: {iterations: 1}\n"
                   "proposer:\n  strategies: false\n"
                   "  llm: {provider: command, command: sh model.sh, variants: 1, chains: true}\n");
  auto build = test::run_forge("--json build", dir.path());
  INFO(build.err);
  REQUIRE(build.exit_code == 0);
  const json r = json::parse(build.out);
  INFO(r["chains"].dump());
  const json* swish = nullptr;
  for (const auto& c : r["chains"])
    if (c["ops"] == json::array({"sigmoid", "mul.Tensor"})) swish = &c;
  REQUIRE(swish);
  CHECK((*swish)["searched"] == true);
  CHECK((*swish)["why"].get<std::string>().rfind("searched with the model's kernels", 0) == 0);
  CHECK((*swish)["search"]["verified"] == 1);
  CHECK(r["llm"]["requests"] == 1);
  const std::string prompt = test::read_text(dir / "prompt-1.txt");
  CHECK(prompt.find("forge_chain::c_") != std::string::npos);
  CHECK(prompt.find("aten::forge_chain") == std::string::npos);
  CHECK(prompt.find("aten::sigmoid") != std::string::npos);
}

TEST_SUITE_END();
}  // namespace forge
