// The run-time checks alone, CUDA backend (test_runtime_checks_cpu.cpp's
// twin): every cheat in tests/adversarial/cuda/ compiled as forge compiles
// CUDA candidates and sent straight to the real worker with the import check
// off and no static check. Each must be rejected with its reason, or gain
// nothing ("neutral": accepted at an honest speed). Skipped, visibly, without
// a GPU (CI); run on the H200.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "rules/evaluate/family.h"
#include "tests/adversarial/direct_worker.h"
#include "tests/support.h"

namespace forge {
namespace fs = std::filesystem;
using nlohmann::json;

TEST_SUITE_BEGIN("adversarial::Cuda");

namespace {

const fs::path kRepo = fs::path(FORGE_TEST_DIR).parent_path();
const fs::path kCheats = fs::path(FORGE_TEST_DIR) / "adversarial" / "cuda";

// '|' separates alternatives; "neutral" among them: accepted, no faster than
// honest (the trick never fires under the judge, or costs the cheat time).
const std::map<std::string, std::string> kExpected = {
    {"softmax_ok", "accepted"},
    {"alias_output", "aliased_output"},
    {"asm_kill_parent", "forbidden"},
    {"asm_syscall_openat", "forbidden"},
    {"asm_syscall_socket", "forbidden"},
    {"cache_sampled_values", "neutral"},
    {"caching_by_pointer", "wrong_result|nan_mismatch"},
    {"default_stream", "side_stream|timing_mismatch"},
    {"device_global_result", "thread_unsafe"},
    {"device_global_row_stats", "thread_unsafe"},
    {"driver_entry_stream", "side_stream|timing_mismatch|forbidden"},
    {"exp_bf16_tail", "inaccurate|wrong_result"},
    {"exp_half_tail", "inaccurate|wrong_result"},
    {"float4_unaligned_input", "cuda_error"},
    {"forge_verdict_every_fd", "forbidden"},
    {"hang", "timeout"},
    {"hardcoded_shape", "wrong_result|nan_mismatch"},
    {"host_abort", "crashed (signal 6"},
    {"illegal_address", "cuda_error"},
    {"lazy_ptsz_split", "side_stream|timing_mismatch|wrong_result|nan_mismatch"},
    {"legacy_stream_cast", "side_stream|timing_mismatch"},
    {"legacy_stream_launch_api", "side_stream|timing_mismatch"},
    {"library_cublas", "bad_candidate|library_call"},
    {"modify_input", "input_modified"},
    {"nan_input_dropped", "nan_mismatch"},
    {"neg_inf_row_zero", "nan_mismatch"},
    {"oob_write", "out_of_bounds"},
    {"per_thread_stream_cast", "side_stream|timing_mismatch"},
    {"persistent_server", "timeout"},
    {"precision_drop", "wrong_result|inaccurate"},
    {"rows_mod8_eq2", "wrong_result"},
    {"side_stream", "timing_mismatch|side_stream"},
    {"thread_constructor_asm_clone", "forbidden"},
    {"thread_constructor_std_thread", "forbidden"},
    {"throw_non_std", "exception"},
    {"throw_runtime_error", "exception"},
    {"timed_canary_before_input", "wrong_result|nan_mismatch|neutral"},
    {"timed_first_calls_device", "wrong_result|nan_mismatch|nondeterministic"},
    {"timed_first_calls_host", "wrong_result|nan_mismatch|nondeterministic"},
    {"timed_poison_isnan", "wrong_result|nan_mismatch|nondeterministic"},
    {"timer_busy_side_stream", "timing_mismatch|neutral"},
    {"timer_got_patch", "forbidden|timing_mismatch|crashed"},
    {"tiny_probs_zeroed", "inaccurate"},
    {"trap", "cuda_error"},
    {"trap_above_64_rows", "cuda_error"},
};

bool cuda_torch() {
  const fs::path venv = kRepo / ".venv" / "bin";
  const std::string cmd = "PATH='" + venv.string() +
                          "':\"$PATH\" python3 -c 'import torch, sys; "
                          "sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

}  // namespace

TEST_CASE("the run-time checks alone reject every CUDA cheat, or leave it nothing to gain") {
  FORGE_SKIP_WITHOUT_GPU();
  if (!cuda_torch()) {
    MESSAGE("SKIPPED (no torch with CUDA on this machine)");
    return;
  }
  test::TempDir dir;
  test::write_text(dir / "softmax.py",
                   "import torch\nx = torch.randn(64, 1000, device='cuda')\n"
                   "print(float(torch.softmax(x, dim=-1).sum()))\n");
  test::write_text(dir / "forge.yaml",
                   "models:\n  sm: {run: python3 softmax.py}\n"
                   "targets: {ops: [_softmax], min_share: 0}\ndevice: {backend: cuda}\n");
  REQUIRE(test::run_forge("capture", dir.path()).exit_code == 0);
  auto first = test::run_forge("--json try sm/_softmax '" + (kCheats / "softmax_ok.cu").string() + "'", dir.path());
  INFO(first.err);
  REQUIRE(first.exit_code == 0);
  const fs::path worker = test::newest_worker();
  REQUIRE(!worker.empty());

  const json family = load_family(kRepo / "targets" / "softmax" / "family.yaml").spec;
  const json args = json::array({{{"type", "Tensor"}, {"dtype", "float32"}, {"sizes", {64, 1000}},
                                  {"strides", {1000, 1}}, {"device", "cuda:0"}, {"name", "self"}},
                                 {{"type", "int"}, {"value", -1}, {"name", "dim"}},
                                 {{"type", "bool"}, {"value", false}, {"name", "half_to_float"}}});
  std::vector<json> requests;
  for (const auto& [name, expected] : kExpected) {
    const fs::path so = dir / (name + ".so");
    REQUIRE_MESSAGE(test::compile_cuda_candidate(kCheats / (name + ".cu"), so), "cannot compile " << name);
    requests.push_back(test::evaluate_request(name, "_softmax", args, family, so));
  }
  auto replies = test::evaluate_directly(worker, requests, dir.path(), "--backend cuda");
  REQUIRE(replies.count("softmax_ok") == 1);
  const json& honest = replies["softmax_ok"];
  INFO(honest.dump().substr(0, 1500));
  REQUIRE(honest["verdict"] == "accepted");
  const double honest_speedup = honest["bench"]["speedup_eager"].get<double>();
  for (const auto& [name, expected] : kExpected) {
    CAPTURE(name);
    CAPTURE(expected);
    REQUIRE(replies.count(name) == 1);
    const json& r = replies[name];
    INFO(r.dump().substr(0, 1500));
    MESSAGE(name << ": " << r.value("verdict", "") << " (" << r.value("reason", "") << ") "
                 << r.value("detail", "").substr(0, 160));
    if (expected == "accepted") {
      CHECK(r["verdict"] == "accepted");
    } else if (r["verdict"] == "accepted") {
      CHECK(test::reason_matches("neutral", expected));
      CHECK(r["bench"]["speedup_eager"].get<double>() < 1.5 * honest_speedup + 0.2);
    } else {
      CHECK(r["verdict"] == "rejected");
      CHECK(test::reason_matches(r.value("reason", ""), expected));
    }
  }
  CHECK(replies.size() == kExpected.size());
}

TEST_SUITE_END();
}  // namespace forge
