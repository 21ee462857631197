// forge build with the model as the only proposer, on the CPU backend: the
// `command` provider is a script that reads the prompt and answers with
// layer_norm's two-pass library kernel in a fence. The kernel must verify, the
// report must name the llm proposer and count the request, and a rebuild must
// replay without asking again. Skipped (visibly) where torch is not importable.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
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

TEST_CASE("forge build with the command provider: an llm kernel verifies and is reported") {
  const fs::path repo = fs::path(FORGE_TEST_DIR).parent_path();
  FORGE_SKIP_WITHOUT_TORCH();
  const std::string key = "sk-PLANTED-build-key-5150";
  ::setenv("FORGE_TEST_PLANTED_KEY", key.c_str(), 1);
  test::TempDir dir;
  fs::copy_file(repo / "examples" / "tiny" / "transformer.py", dir / "transformer.py");
  test::write_text(dir / "kernel.cpp", test::library_kernel("layer_norm", "two_pass"));
  test::write_text(dir / "model.sh",
                   "#!/bin/sh\ncat > prompt.txt\necho 'Two passes per row.'\n"
                   "echo '```cpp'\ncat kernel.cpp\necho '```'\n");
  test::write_text(dir / "forge.yaml",
                   "models:\n  transformer: {run: python transformer.py}\n"
                   "targets: {ops: [native_layer_norm], top: 1, min_share: 0}\n"
                   "budget: {iterations: 1}\n"
                   "proposer:\n  strategies: false\n"
                   "  llm: {provider: command, command: sh model.sh, variants: 2}\n");

  auto first = test::run_forge("--json build", dir.path());
  INFO(first.err);
  REQUIRE(first.exit_code == 0);
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
  CHECK(t["llm"]["requests"] == 1);
  CHECK(r["llm"]["requests"] == 1);
  CHECK(r["llm"]["cost_usd"].is_null());
  CHECK(r["llm"]["prompt_chars"]["largest"].get<long>() > 1000);

  // The prompt the script saw: the op's semantics, the ABI, the rules, the device.
  const std::string prompt = test::read_text(dir / "prompt.txt");
  for (const char* part : {"aten::native_layer_norm", "# layer_norm", "FORGE_ABI_VERSION",
                           "`thread`", "CPU: ", "From scratch", "ln(stock median / your median)"}) {
    CAPTURE(part);
    CHECK(prompt.find(part) != std::string::npos);
  }

  // Unchanged: the journal replays, nothing is asked or evaluated.
  fs::remove(dir / "prompt.txt");
  auto again = test::run_forge("--json build", dir.path());
  REQUIRE(again.exit_code == 0);
  json r2 = json::parse(again.out);
  CHECK(r2["steps_run"] == 0);
  CHECK(r2["targets"][0]["verified"] == 1);
  CHECK(r2["targets"][0]["llm"]["requests"] == 0);
  CHECK_FALSE(fs::exists(dir / "prompt.txt"));

  CHECK_FALSE(tree_contains(dir.path(), key));
  CHECK(first.out.find(key) == std::string::npos);
  CHECK(first.err.find(key) == std::string::npos);
}

TEST_SUITE_END();
}  // namespace forge
