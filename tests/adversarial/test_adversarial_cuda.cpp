// The adversarial suite, CUDA backend, for real: one capture of a tiny softmax
// script on the GPU, then `forge try` with every cheat in tests/adversarial/cuda/
// (each file's comment says what it does and what rejects it) and one honest
// softmax. Skipped, visibly, on machines without a GPU (CI); run on the H200.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/adversarial/direct_worker.h"
#include "tests/support.h"

namespace forge {
namespace fs = std::filesystem;
using nlohmann::json;

TEST_SUITE_BEGIN("adversarial::Cuda");

namespace {

const fs::path kCheats = fs::path(FORGE_TEST_DIR) / "adversarial" / "cuda";

// torch with CUDA, from the project's venv or the python3 on PATH (as forge finds it).
bool have_cuda_torch() {
  const fs::path venv = fs::path(FORGE_TEST_DIR).parent_path() / ".venv" / "bin";
  const std::string cmd = "PATH='" + venv.string() +
                          "':\"$PATH\" python3 -c 'import torch, sys; "
                          "sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

struct Expect {
  const char* file;
  const char* verdict;
  const char* reason;
  const char* detail;  // a substring of the detail ("" = anything)
};

const Expect kExpected[] = {
    {"softmax_ok.cu", "accepted", "ok", "verified on"},
    {"side_stream.cu", "rejected", "static_check", "stream (line"},
    {"default_stream.cu", "rejected", "static_check", "default_stream (line"},
    {"library_cublas.cu", "rejected", "static_check", "library (line"},
    {"caching_by_pointer.cu", "rejected", "wrong_result", ""},
    {"precision_drop.cu", "rejected", "wrong_result", ""},
    {"modify_input.cu", "rejected", "input_modified", ""},
    {"alias_output.cu", "rejected", "aliased_output", "outputs[0].data"},
    {"hardcoded_shape.cu", "rejected", "nan_mismatch|wrong_result", "edge"},
    {"oob_write.cu", "rejected", "out_of_bounds", ""},
    {"illegal_address.cu", "rejected", "cuda_error", ""},
    {"trap.cu", "rejected", "cuda_error", ""},
    {"hang.cu", "rejected", "timeout", "no reply within"},
    {"host_abort.cu", "rejected", "crashed (signal 6: Aborted)", ""},
    // After every crash and restart, the honest kernel still passes.
    {"softmax_ok.cu", "accepted", "ok", "verified on"},
};

}  // namespace

TEST_CASE("every CUDA cheat is rejected with its reason; the honest softmax is accepted") {
  FORGE_SKIP_WITHOUT_GPU();
  if (!have_cuda_torch()) {
    MESSAGE("SKIPPED (no torch with CUDA on this machine)");
    return;
  }
  test::TempDir dir;
  test::write_text(dir / "softmax.py",
                   "import torch\n"
                   "torch.manual_seed(0)\n"
                   "x = torch.randn(64, 1000, device='cuda')\n"
                   "for _ in range(3):\n"
                   "    y = torch.softmax(x, dim=-1)\n"
                   "torch.cuda.synchronize()\n"
                   "print(float(y.sum()))\n");
  test::write_text(dir / "forge.yaml",
                   "models:\n  sm: {run: python3 softmax.py}\n"
                   "targets: {ops: [_softmax], min_share: 0}\ndevice: {backend: cuda}\n");
  auto cap = test::run_forge("--json capture", dir.path());
  INFO(cap.err);
  REQUIRE(cap.exit_code == 0);
  json targets = json::parse(cap.out)["targets"];
  REQUIRE(targets.size() == 1);
  const std::string target = targets[0]["id"];

  for (const Expect& e : kExpected) {
    const std::string file = e.file;
    CAPTURE(file);
    const std::string timeout = std::string(e.reason) == "timeout" ? " --timeout 20" : "";
    auto r = test::run_forge(
        "--json try " + target + " '" + (kCheats / e.file).string() + "'" + timeout, dir.path());
    INFO(r.err);
    json rec = json::parse(r.out, nullptr, false);
    REQUIRE_MESSAGE(rec.is_object(), r.out);
    INFO(rec.dump(2).substr(0, 3000));
    MESSAGE(file << ": " << rec.value("verdict", "") << " (" << rec.value("reason", "") << ") "
                 << rec.value("detail", ""));
    CHECK(rec["verdict"] == e.verdict);
    CHECK(test::reason_matches(rec.value("reason", ""), e.reason));
    CHECK(rec["detail"].get<std::string>().find(e.detail) != std::string::npos);
    CHECK(r.exit_code == (std::string(e.verdict) == "accepted" ? 0 : 1));
    if (std::string(e.verdict) == "accepted") {
      CHECK(rec["bench"]["timing"] == "cuda_events");
      CHECK(rec["bench"]["candidate_us"]["median"].get<double>() > 0);
      CHECK(rec["bench"]["hot"]["speedup_eager"].get<double>() > 0);  // hot inputs, reported
    }
  }
}

TEST_SUITE_END();
}  // namespace forge
