// A captured script built with the strategy library's first instance per
// target: the class tests (test_pointwise_torch, test_reduce_torch,
// test_softmax_dims_torch) share it.
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/support.h"

namespace forge::test {

// `forge --json build` of tests/rules/search/<name>/model.py in `dir`, on the
// CPU with one intra-op thread, every captured op a target (top 0,
// min_share 0), one candidate per target (the root's first: each applicable
// strategy's first parameters) and one timed model run each way. REQUIREs a
// clean exit; returns the report.
inline nlohmann::json build_library_script(const std::string& name, const TempDir& dir) {
  namespace fs = std::filesystem;
  fs::copy_file(fs::path(FORGE_TEST_DIR) / "rules" / "search" / name / "model.py", dir / "model.py");
  write_text(dir / "forge.yaml",
             "models:\n  m: {run: python model.py, check_runs: 1, env: {OMP_NUM_THREADS: '1'}}\n"
             "targets: {top: 0, min_share: 0}\n"
             "budget: {iterations: 1}\n");
  auto build = run_forge("--json build", dir.path());
  INFO(build.err);
  REQUIRE(build.exit_code == 0);
  return nlohmann::json::parse(build.out);
}

}  // namespace forge::test
