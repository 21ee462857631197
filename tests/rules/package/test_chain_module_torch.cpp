// Chains packaged in place of module forwards (issue 33, item 4, eager):
// `forge build` on tests/rules/package/chain_module/model.py finds the chains
// that are a module class's whole forward (Swish, its multiply in place,
// which the forward's recorded calls show as mul_ and compiled graphs as mul;
// QuickGELU, whose factor is
// an attribute read as a Python number; a GroupNorm submodule then SiLU,
// fused in the group_norm template; Hugging Face's RMSNorm, in the rms_norm
// template, and on bfloat16 with its casts; MinGPT's GELU, whose data flow
// branches; attention scores, a softmax in float32 between a scale and mask
// and a cast back, in the reduce_pointwise template), searches, verifies and packages
// them; `forge run` then calls their fused kernels from the unchanged script,
// with outputs equal to a stock run's, also after the factor changes; a call
// that needs grad runs the original forward; a chain spelled in a plain
// function is not packaged and says why; compiled graphs of the same modules
// call the chain ops too. Skipped (visibly) without torch.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/support.h"

namespace forge {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The script's stdout under plain Python (no forge library loaded).
std::string run_stock(const fs::path& dir, const std::string& env) {
  const fs::path python = fs::path(FORGE_TEST_DIR).parent_path() / ".venv" / "bin" / "python";
  const std::string cmd = "cd '" + dir.string() + "' && env OMP_NUM_THREADS=1 " + env + " '" + python.string() +
                          "' model.py > stock.txt";
  REQUIRE(std::system(cmd.c_str()) == 0);
  return test::read_text(dir / "stock.txt");
}

// The numbers the script printed, line by line.
std::vector<std::vector<double>> numbers(const std::string& text) {
  std::vector<std::vector<double>> out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream in(line);
    out.emplace_back();
    for (double v; in >> v;) out.back().push_back(v);
  }
  return out;
}

// A forged run's checksums against stock's: equal within fp32 rounding of the sums.
void check_same(const std::string& forged, const std::string& stock) {
  const auto f = numbers(forged), s = numbers(stock);
  REQUIRE(f.size() == s.size());
  for (size_t i = 0; i < f.size(); ++i) {
    REQUIRE(f[i].size() == s[i].size());
    for (size_t k = 0; k < f[i].size(); ++k) CHECK(std::fabs(f[i][k] - s[i][k]) <= 1e-5 * (1 + std::fabs(s[i][k])));
  }
}

// Forged calls per chain target's module class, from a `forge run` report.
std::map<std::string, long> forged_chains(const json& report, const std::map<std::string, std::string>& class_of) {
  std::map<std::string, long> out;
  for (const auto& e : report["entries"])
    if (auto it = class_of.find(e.value("target", "")); it != class_of.end()) out[it->second] += e.value("forged", 0L);
  return out;
}

}  // namespace

TEST_SUITE_BEGIN("rules::ChainModule");

TEST_CASE("a chain that is a module's whole forward ships and replaces that forward under forge run") {
  FORGE_SKIP_WITHOUT_TORCH();
  test::TempDir dir;
  fs::copy_file(fs::path(FORGE_TEST_DIR) / "rules" / "package" / "chain_module" / "model.py", dir / "model.py");
  // One end-to-end run: fewer than three never judge the model slower, which
  // on a loaded CPU could leave every kernel out of the package read below.
  test::write_text(dir / "forge.yaml",
                   "models:\n  m: {run: python model.py, check_runs: 1, env: {OMP_NUM_THREADS: '1'}}\n"
                   "device: {backend: cpu}\n"
                   "budget: {iterations: 1}\n"
                   "targets: {top: 7}\n");
  auto build = test::run_forge("--json build", dir.path());
  INFO(build.err);
  REQUIRE(build.exit_code == 0);
  const json report = json::parse(build.out);
  CAPTURE(report["chains"].dump());
  std::map<std::string, std::string> class_of;  // chain target -> module class
  bool function_chain = false;
  for (const auto& c : report["chains"]) {
    const auto ops = c["ops"].get<std::vector<std::string>>();
    if (c["module"].is_string() && c["whole_forward"] == true) {
      CHECK(c["module_code"].is_string());
      CHECK(c["search"]["packaged"] == true);
      CHECK(c["why"].get<std::string>().find("replaces " + c["module"].get<std::string>() + ".forward") !=
            std::string::npos);
      class_of[c["id"].get<std::string>()] = c["module"].get<std::string>();
    } else if (ops == std::vector<std::string>{"sigmoid", "mul.Tensor", "sum.dim_IntList"}) {
      function_chain = true;  // the plain function's Swish, and its sum outside any module
      CHECK(c["module"].is_null());
      CHECK(c.value("search", json::object()).value("packaged", false) == false);
    }
  }
  CHECK(function_chain);
  REQUIRE(class_of.size() == 7);
  std::map<std::string, int> classes;
  for (const auto& [id, cls] : class_of) ++classes[cls];
  CHECK(classes == std::map<std::string, int>{{"__main__.AttnScores", 1}, {"__main__.GroupNormSiLU", 1}, {"__main__.NewGELU", 1},
                                              {"__main__.QuickGELU", 1},     {"__main__.RMSNorm", 1},
                                              {"__main__.RMSNorm16", 1},     {"__main__.Swish", 1}});

  // The package: a chain entry names its op, definition and module.
  REQUIRE(fs::exists(dir / ".forge" / "package" / "package.json"));
  const json pkg = json::parse(test::read_text(dir / ".forge" / "package" / "package.json"));
  int chain_entries = 0;
  for (const auto& e : pkg["entries"])
    if (e.contains("chain")) {
      ++chain_entries;
      CHECK(e["op"].get<std::string>().rfind("forge_chain::c_", 0) == 0);
      CHECK(e["module"]["code"].is_string());
      CHECK(class_of.count(e["target"].get<std::string>()) == 1);
    }
  CHECK(chain_entries == 7);
  CHECK(fs::exists(dir / ".forge" / "package" / "forge_modules.py"));

  // forge run: each module's first call of a signature runs the original
  // forward (it is recorded and matched against the chain), the other three
  // call the fused op; outputs equal stock's.
  auto run = test::run_forge("run --json-report run.json -- env OMP_NUM_THREADS=1 python model.py", dir.path());
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  check_same(run.out, run_stock(dir.path(), ""));
  CHECK(forged_chains(json::parse(test::read_text(dir / "run.json")), class_of) ==
        std::map<std::string, long>{{"__main__.AttnScores", 3}, {"__main__.GroupNormSiLU", 3}, {"__main__.NewGELU", 3},
                                    {"__main__.QuickGELU", 3},     {"__main__.RMSNorm", 3},
                                    {"__main__.RMSNorm16", 3},     {"__main__.Swish", 3}});

  // The factor changes after the first call: the new value is a new call
  // signature, matched again, and read by the fused kernel.
  auto alpha = test::run_forge(
      "run --json-report alpha.json -- env OMP_NUM_THREADS=1 FORGE_TEST_ALPHA=1.0 python model.py", dir.path());
  INFO(alpha.err);
  REQUIRE(alpha.exit_code == 0);
  check_same(alpha.out, run_stock(dir.path(), "FORGE_TEST_ALPHA=1.0"));
  CHECK(forged_chains(json::parse(test::read_text(dir / "alpha.json")), class_of) ==
        std::map<std::string, long>{{"__main__.AttnScores", 3}, {"__main__.GroupNormSiLU", 3}, {"__main__.NewGELU", 3},
                                    {"__main__.QuickGELU", 2},     {"__main__.RMSNorm", 3},
                                    {"__main__.RMSNorm16", 3},     {"__main__.Swish", 3}});

  // Grad mode: Swish's input and GroupNorm's and the RMSNorms' weights need grad, so their
  // original forwards run (the kernels have no backward).
  auto grad = test::run_forge(
      "run --json-report grad.json -- env OMP_NUM_THREADS=1 FORGE_TEST_GRAD=1 python model.py", dir.path());
  INFO(grad.err);
  REQUIRE(grad.exit_code == 0);
  check_same(grad.out, run_stock(dir.path(), "FORGE_TEST_GRAD=1"));
  CHECK(forged_chains(json::parse(test::read_text(dir / "grad.json")), class_of) ==
        std::map<std::string, long>{{"__main__.AttnScores", 3}, {"__main__.GroupNormSiLU", 0}, {"__main__.NewGELU", 3},
                                    {"__main__.QuickGELU", 3},     {"__main__.RMSNorm", 0},
                                    {"__main__.RMSNorm16", 0},     {"__main__.Swish", 0}});

  // Compiled graphs: the post-grad pass replaces each chain by its forged op
  // (policy forge: this machine's measured choice may go either way), also
  // where the single-op routes had already taken the chain's ops and where
  // Inductor would decompose them (group norm, SiLU).
  fs::copy_file(fs::path(FORGE_TEST_DIR) / "rules" / "package" / "chain_module" / "compiled.py",
                dir / "compiled.py");
  auto compiled = test::run_forge(
      "run --json-report compiled.json -- env OMP_NUM_THREADS=1 FORGE_COMPILE_POLICY=forge python compiled.py",
      dir.path());
  INFO(compiled.err);
  REQUIRE(compiled.exit_code == 0);
  CHECK(compiled.out == "match True True True True True True True\n");
  CHECK(forged_chains(json::parse(test::read_text(dir / "compiled.json")), class_of) ==
        std::map<std::string, long>{{"__main__.AttnScores", 3}, {"__main__.GroupNormSiLU", 3}, {"__main__.NewGELU", 3},
                                    {"__main__.QuickGELU", 3},     {"__main__.RMSNorm", 3},
                                    {"__main__.RMSNorm16", 3},     {"__main__.Swish", 3}});
}

TEST_SUITE_END();
}  // namespace forge
