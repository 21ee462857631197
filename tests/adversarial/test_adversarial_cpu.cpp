// The adversarial suite, CPU backend, for real: one capture of a tiny softmax
// script with the real capture library, then `forge try` with every cheat in
// tests/adversarial/cpu/ (each file's comment says what it does and what
// rejects it) and one honest softmax. Every cheat must be rejected with its
// reason; the honest one accepted. Runs the real worker (runtime/worker),
// built by forge against the venv's torch; skipped, visibly, without torch.
//
// The candidates are .cc files so the test build's tests/*.cpp glob leaves them alone.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/support.h"

namespace forge {
namespace fs = std::filesystem;
using nlohmann::json;

TEST_SUITE_BEGIN("adversarial::Cpu");

namespace {

const fs::path kRepo = fs::path(FORGE_TEST_DIR).parent_path();
const fs::path kCheats = fs::path(FORGE_TEST_DIR) / "adversarial" / "cpu";

struct Expect {
  const char* file;
  const char* verdict;
  const char* reason;
  const char* detail;  // a substring of the detail ("" = anything)
};

// What rejects each cheat (tests/adversarial/cpu/<file> says why).
const Expect kExpected[] = {
    {"softmax_ok.cc", "accepted", "ok", "verified on"},
    {"caching_by_pointer.cc", "rejected", "wrong_result", ""},
    {"alias_output.cc", "rejected", "aliased_output", "outputs[0].data"},
    {"side_thread.cc", "rejected", "static_check", "thread (line"},
    {"library_dlsym.cc", "rejected", "static_check", "dynamic_loading (line"},
    {"modify_input.cc", "rejected", "input_modified", ""},
    {"hardcoded_shape.cc", "rejected", "nan_mismatch|wrong_result", "edge"},
    {"precision_drop.cc", "rejected", "wrong_result", ""},
    {"oob_read.cc", "rejected", "wrong_result", ""},
    {"oob_write.cc", "rejected", "out_of_bounds", "wrote outside output"},
    {"infinite_loop.cc", "rejected", "timeout", "no reply within"},
    {"abort.cc", "rejected", "crashed (signal 6: Aborted)", ""},
    {"segfault.cc", "rejected", "crashed (signal 11: Segmentation fault)", ""},
    {"compile_error.cc", "rejected", "compile_error", "softmax_rows"},
    // Under the judge these behave honestly (test_runtime_checks_cpu.cpp);
    // the filters refuse what they read to tell the user's process apart.
    {"env_macro_environ.cc", "rejected", "static_check|bad_candidate", ""},
    {"env_link_map_getenv.cc", "rejected", "static_check|bad_candidate", ""},
};

// The reason, or one of several separated by '|' (a call's poison pattern is
// random: a skipped write reads as NaN or as a wrong value).
bool reason_is(const std::string& reason, const std::string& expected) {
  size_t start = 0;
  while (start <= expected.size()) {
    size_t bar = expected.find('|', start);
    if (reason == expected.substr(start, bar == std::string::npos ? std::string::npos : bar - start)) return true;
    if (bar == std::string::npos) break;
    start = bar + 1;
  }
  return false;
}

std::string quote(const fs::path& p) {
  return "'" + p.string() + "'";
}

}  // namespace

TEST_CASE("every CPU cheat is rejected with its reason; the honest softmax is accepted") {
  FORGE_SKIP_WITHOUT_TORCH();
  test::TempDir dir;
  test::write_text(dir / "softmax.py",
                   "import torch\n"
                   "torch.manual_seed(0)\n"
                   "x = torch.randn(64, 1000)\n"
                   "for _ in range(3):\n"
                   "    y = torch.softmax(x, dim=-1)\n"
                   "print(float(y.sum()))\n");
  test::write_text(
      dir / "forge.yaml",
      "models:\n  sm: {run: python softmax.py}\ntargets: {ops: [_softmax], min_share: 0}\n");

  // Before a capture there is nothing to try against.
  auto early = test::run_forge("try sm/_softmax " + quote(kCheats / "softmax_ok.cc"), dir.path());
  CHECK(early.exit_code == 1);
  CHECK(early.err ==
        "forge: error: model 'sm' is not captured: run `forge build` or `forge capture` first\n");

  auto cap = test::run_forge("--json capture", dir.path());
  INFO(cap.err);
  REQUIRE(cap.exit_code == 0);
  json targets = json::parse(cap.out)["targets"];
  REQUIRE(targets.size() == 1);
  REQUIRE(targets[0]["op"] == "_softmax");
  const std::string target = targets[0]["id"];

  for (const Expect& e : kExpected) {
    const std::string file = e.file;
    CAPTURE(file);
    const std::string timeout = std::string(e.reason) == "timeout" ? " --timeout 10" : "";
    auto r = test::run_forge("--json try " + target + " " + quote(kCheats / e.file) + timeout,
                             dir.path());
    INFO(r.err);
    json rec = json::parse(r.out, nullptr, false);
    REQUIRE_MESSAGE(rec.is_object(), r.out);
    INFO(rec.dump(2).substr(0, 3000));
    CHECK(rec["verdict"] == e.verdict);
    CHECK(reason_is(rec.value("reason", ""), e.reason));
    CHECK(rec["detail"].get<std::string>().find(e.detail) != std::string::npos);
    CHECK(r.exit_code == (std::string(e.verdict) == "accepted" ? 0 : 1));
    if (std::string(e.verdict) == "accepted") {
      CHECK(rec["bench"]["candidate_us"]["median"].get<double>() > 0);
      CHECK(rec["bench"]["eager_us"]["median"].get<double>() > 0);
      // Hot-input figures beside the cold ones (reported, not judged).
      CHECK(rec["bench"]["hot"]["candidate_us"]["median"].get<double>() > 0);
      CHECK(rec["bench"]["hot"]["speedup_eager"].get<double>() > 0);
      CHECK(rec["verify"]["cases"].get<int>() > 1);
    }
  }

  // Text output: compile errors verbatim, timings beside the baselines.
  auto text =
      test::run_forge("try " + target + " " + quote(kCheats / "compile_error.cc"), dir.path());
  CHECK(text.exit_code == 1);
  CHECK(text.out.find("verdict    rejected (compile_error)") != std::string::npos);
  // The compiler's own words, about the candidate's line 6 (compiled as candidate.cpp).
  CHECK(text.out.find("candidate.cpp:6:") != std::string::npos);
  CHECK(text.out.find("return softmax_rows(call);  // never declared") != std::string::npos);
  auto ok = test::run_forge("try " + target + " " + quote(kCheats / "softmax_ok.cc"), dir.path());
  CHECK(ok.exit_code == 0);
  CHECK(ok.out.find("verdict    accepted (ok)") != std::string::npos);
  CHECK(ok.out.find("torch.compile - (not measured yet)") != std::string::npos);
  CHECK(ok.out.find("evaluated  in") != std::string::npos);
  CHECK(ok.out.find("(cached)") != std::string::npos);  // the same candidate again

  // Usage errors name the problem.
  auto wrong_lang = test::run_forge(
      "try " + target + " " + quote(kRepo / "tests" / "adversarial" / "cuda" / "softmax_ok.cu"),
      dir.path());
  CHECK(wrong_lang.exit_code == 2);
  CHECK(wrong_lang.err.find("was captured on the CPU (write a .cpp)") != std::string::npos);
  auto unknown =
      test::run_forge("try nope/_softmax " + quote(kCheats / "softmax_ok.cc"), dir.path());
  CHECK(unknown.exit_code == 2);
  CHECK(unknown.err.find("unknown target 'nope/_softmax'") != std::string::npos);
}

// group_norm's batch is both the input's dim 0 and the N scalar (the family's
// `pins`): the edge cases set both, so other batch sizes are verified, and a
// kernel that hard-codes the captured batch is caught. Before the pin, the
// stock kernel refused every edge case and the cheat was accepted.
TEST_CASE("group_norm edge cases vary the batch with its N scalar; a hard-coded batch is rejected") {
  FORGE_SKIP_WITHOUT_TORCH();
  test::TempDir dir;
  test::write_text(dir / "gn.py",
                   "import torch\n"
                   "import torch.nn.functional as F\n"
                   "torch.manual_seed(0)\n"
                   "x, w, b = torch.randn(2, 8, 4, 4), torch.randn(8), torch.randn(8)\n"
                   "for _ in range(3):\n"
                   "    y = F.group_norm(x, 2, w, b)\n"
                   "print(float(y.sum()))\n");
  test::write_text(dir / "forge.yaml",
                   "models:\n  gn: {run: python gn.py}\ntargets: {ops: [native_group_norm], min_share: 0}\n");
  auto cap = test::run_forge("--json capture", dir.path());
  INFO(cap.err);
  REQUIRE(cap.exit_code == 0);
  json targets = json::parse(cap.out)["targets"];
  REQUIRE(targets.size() == 1);
  const std::string target = targets[0]["id"];

  auto try_file = [&](const char* file) {
    auto r = test::run_forge("--json try " + target + " " + quote(kCheats / file), dir.path());
    INFO(r.err);
    json rec = json::parse(r.out, nullptr, false);
    REQUIRE_MESSAGE(rec.is_object(), r.out);
    return rec;
  };
  json ok = try_file("group_norm_ok.cc");
  INFO(ok.dump(2).substr(0, 3000));
  CHECK(ok["verdict"] == "accepted");
  CHECK(ok["verify"]["skipped"] == 0);  // batch 1 and 3 ran
  for (const auto& note : ok.value("notes", json::array()))
    CHECK(note.get<std::string>().find("skipped") == std::string::npos);

  json cheat = try_file("group_norm_fixed_batch.cc");
  INFO(cheat.dump(2).substr(0, 3000));
  CHECK(cheat["verdict"] == "rejected");
  CHECK(cheat["reason"] == "out_of_bounds");
  CHECK(cheat["detail"].get<std::string>().find("edge") != std::string::npos);
}

TEST_SUITE_END();
}  // namespace forge
