// The run-time checks alone, CPU backend: every cheat in tests/adversarial/cpu/
// is compiled as forge compiles candidates and sent straight to the real
// worker with the import check off (--no-import-check) and no static check,
// so only the runner's sandbox, the judge's checks and the clock cross-check
// stand between the cheat and acceptance. Each must be rejected with its
// reason, or (the "neutral" ones) gain nothing: accepted at an honest speed,
// because the trick it relies on never fires under the judge. Cheats that only
// the import or static check can name (the environment, read to tell the
// user's process from the judge's) are neutral here; the forge try suite
// checks that those filters refuse them.
//
// The worker is the one `forge try` built (the newest under forge's cache).
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

TEST_SUITE_BEGIN("adversarial::Cpu");

namespace {

const fs::path kRepo = fs::path(FORGE_TEST_DIR).parent_path();
const fs::path kCheats = fs::path(FORGE_TEST_DIR) / "adversarial" / "cpu";

// Reasons a cheat may be rejected with ('|' separates alternatives: the
// poison pattern of a call is random, so a skipped write reads as NaN or as
// a wrong value); "neutral": accepted, no faster than honest.
const std::map<std::string, std::string> kExpected = {
    {"softmax_ok", "accepted"},
    {"abort", "crashed (signal 6"},
    {"abort_above_64_rows", "crashed (signal 6"},
    {"abort_above_100_rows", "crashed (signal 6"},
    {"alias_output", "aliased_output"},
    {"asm_syscall_fork", "forbidden"},
    {"asm_syscall_openat", "forbidden"},
    {"asm_syscall_socket", "forbidden"},
    {"cache_first_row_max", "wrong_result|neutral"},  // caught when two timed windows share the first row's max
    {"cache_sampled_hash", "neutral"},
    {"caching_by_pointer", "wrong_result|nan_mismatch"},
    {"decline_off_signature", "declined"},
    {"decline_unless_block", "declined"},
    {"env_link_map_getenv", "neutral"},
    {"env_macro_environ", "neutral"},
    {"forge_verdict_every_fd", "forbidden"},
    {"global_row_state", "thread_unsafe"},
    {"forge_verdict_proc_fd", "forbidden"},
    {"hardcoded_shape", "wrong_result|nan_mismatch|out_of_bounds"},
    {"infinite_loop", "timeout"},
    {"library_dlsym", "declined"},
    {"modify_input", "input_modified"},
    {"nan_input_dropped", "nan_mismatch"},
    {"neg_inf_row_zero", "nan_mismatch"},
    {"oob_read", "wrong_result"},
    {"oob_write", "out_of_bounds"},
    {"precision_drop", "wrong_result|inaccurate"},
    {"rows_wrong_untested", "wrong_result"},
    {"segfault", "crashed (signal 11"},
    {"side_thread", "forbidden"},
    {"signal_parent", "forbidden"},
    {"static_result_buffer", "thread_unsafe"},
    {"static_scratch_row", "thread_unsafe"},
    {"syscall_openat", "forbidden"},
    {"thread_alias_template", "forbidden"},
    {"thread_constructor_pool", "forbidden"},
    {"thread_link_map_pthread", "forbidden"},
    {"throw_runtime_error", "exception"},
    {"timed_canary_before_input", "neutral"},
    {"timed_first_calls", "wrong_result|nan_mismatch|nondeterministic"},
    {"timed_poison_bits", "wrong_result|nan_mismatch|nondeterministic"},
    {"timed_poison_isnan", "wrong_result|nan_mismatch|nondeterministic"},
    // Wrong from 0.5 s after its first call: whichever check runs then says so
    // (a verification case, the concurrency check or a timed call).
    {"timed_wall_clock", "wrong_result|nan_mismatch|nondeterministic|thread_unsafe"},
    {"timer_busy_thread", "forbidden"},
    {"timer_got_patch", "forbidden|timing_mismatch"},
    {"timer_text_patch", "forbidden|timing_mismatch"},
    {"tiny_probs_exp_flushed", "inaccurate"},
    {"tiny_probs_zeroed", "inaccurate"},
    {"unaligned_input_crash", "crashed (signal 11"},
    {"vector_at_out_of_range", "exception"},
};

// The worker `forge try` builds against the venv's torch (a softmax script
// captured in `dir`, the honest softmax tried); empty when none was found.
fs::path worker_built_by_forge_try(const fs::path& dir) {
  test::write_text(dir / "softmax.py",
                   "import torch\nx = torch.randn(64, 1000)\nprint(float(torch.softmax(x, dim=-1).sum()))\n");
  test::write_text(dir / "forge.yaml",
                   "models:\n  sm: {run: python softmax.py}\ntargets: {ops: [_softmax], min_share: 0}\n");
  REQUIRE(test::run_forge("capture", dir).exit_code == 0);
  auto first = test::run_forge("--json try sm/_softmax '" + (kCheats / "softmax_ok.cc").string() + "'", dir);
  INFO(first.err);
  REQUIRE(first.exit_code == 0);
  const fs::path worker = test::newest_worker();
  REQUIRE_MESSAGE(!worker.empty(), "no forge_worker under " << (user_cache_dir() / "runtime").string());
  return worker;
}

// `name`.cc from tests/adversarial/cpu compiled as forge compiles CPU candidates.
fs::path compile_cheat(const fs::path& dir, const std::string& name) {
  const fs::path so = dir / (name + ".so");
  const std::string cc = "c++ -O2 -std=c++17 -fPIC -shared -I'" + (kRepo / "runtime" / "abi").string() +
                         "' -x c++ '" + (kCheats / (name + ".cc")).string() + "' -o '" + so.string() + "' 2>&1";
  REQUIRE_MESSAGE(std::system(cc.c_str()) == 0, "cannot compile " << name);
  return so;
}

}  // namespace

TEST_CASE("the run-time checks alone reject every CPU cheat, or leave it nothing to gain") {
  FORGE_SKIP_WITHOUT_TORCH();
  test::TempDir dir;
  const fs::path worker = worker_built_by_forge_try(dir.path());

  const json family = load_family(kRepo / "targets" / "softmax" / "family.yaml").spec;
  const json args = json::array({{{"type", "Tensor"}, {"dtype", "float32"}, {"sizes", {64, 1000}},
                                  {"strides", {1000, 1}}, {"device", "cpu"}, {"name", "self"}},
                                 {{"type", "int"}, {"value", -1}, {"name", "dim"}},
                                 {{"type", "bool"}, {"value", false}, {"name", "half_to_float"}}});
  std::vector<json> requests;
  for (const auto& [name, expected] : kExpected) {
    const fs::path so = compile_cheat(dir.path(), name);
    requests.push_back(
        {{"cmd", "evaluate"},
         {"id", name},
         {"op", "_softmax"},
         {"args", args},
         {"samples", json::array()},
         {"family", family},
         {"candidate", so.string()},
         {"seed", 7},
         {"call_timeout_seconds", 5},
         {"bench", {{"warmup", 3}, {"reps", 20}, {"min_seconds", 0.1}, {"max_seconds", 5}, {"threads", 1}}}});
  }
  auto replies = test::evaluate_directly(worker, requests, dir.path(), "--backend cpu --ceiling 1e10");
  REQUIRE(replies.count("softmax_ok") == 1);
  const json& honest = replies["softmax_ok"];
  REQUIRE(honest["verdict"] == "accepted");
  const double honest_speedup = honest["bench"]["speedup_eager"].get<double>();
  for (const auto& [name, expected] : kExpected) {
    CAPTURE(name);
    CAPTURE(expected);
    REQUIRE(replies.count(name) == 1);
    const json& r = replies[name];
    INFO(r.dump().substr(0, 1500));
    if (expected == "accepted") {
      CHECK(r["verdict"] == "accepted");
    } else if (r["verdict"] == "accepted") {
      // Accepted only at an honest speed: the cheats it stands for are 10-100x.
      CHECK(test::reason_matches("neutral", expected));
      CHECK(r["bench"]["speedup_eager"].get<double>() < 2.0 * honest_speedup + 0.2);
    } else {
      CHECK(r["verdict"] == "rejected");
      CHECK(test::reason_matches(r.value("reason", ""), expected));
    }
  }
  // Nothing a candidate did reached the judge's reply stream: one reply per request.
  CHECK(replies.size() == kExpected.size());
}

// Whether torch's CPU gelu is off by more than `tol` ({atol, rtol}) from the
// float64 formula somewhere in [-3.48, -3.42], as the AVX-512 path is; the
// AVX2 path of an AMD EPYC is not (2.2e-7 against atol 1e-6).
static bool stock_gelu_off(const json& tol) {
  const std::string py =
      "import sys, torch\n"
      "x = torch.linspace(-3.48, -3.42, 1 << 18)\n"
      "s = torch.nn.functional.gelu(x).double(); d = x.double(); r = 0.5 * d * (1 + torch.erf(d / 2 ** 0.5))\n"
      "sys.exit(0 if ((s - r).abs() > " + tol["atol"].dump() + " + " + tol["rtol"].dump() + " * r.abs()).any() else 1)\n";
  return std::system(("'" + (kRepo / ".venv" / "bin" / "python").string() + "' -c '" + py + "'").c_str()) == 0;
}

// The pointwise family's compare_float64: an element outside the tolerance of
// stock passes when inside it of the float64 evaluation. Inputs drawn where
// torch's CPU gelu is off by more than atol (x in [-3.48, -3.42]): the
// correctly rounded gelu is rejected without the rule and accepted with it,
// verified and timed calls alike; two approximations passed off as the exact
// op stay rejected with it, the detail naming the float64 value.
TEST_CASE("compare_float64 accepts a kernel nearer the true value than stock, never an approximation") {
  FORGE_SKIP_WITHOUT_TORCH();
  test::TempDir dir;
  const fs::path worker = worker_built_by_forge_try(dir.path());
  json family = load_family(kRepo / "targets" / "pointwise" / "family.yaml").spec;
  REQUIRE(family.value("compare_float64", false));
  family["verify"]["ranges"] = json::array({json::array({-3.48, -3.42})});
  // Stock's gelu(+inf) is +inf or NaN as the CPU's vector path goes (AVX2 on
  // an AMD EPYC: +inf); this test is about finite elements.
  family["verify"]["specials"] = json::array({"nan"});
  json strict = family;
  strict["compare_float64"] = false;
  const json args = json::array({{{"type", "Tensor"}, {"dtype", "float32"}, {"sizes", {256, 1024}},
                                  {"strides", {1024, 1}}, {"device", "cpu"}, {"name", "self"}},
                                 {{"type", "str"}, {"value", "none"}, {"name", "approximate"}}});
  auto request = [&](const std::string& id, const std::string& cheat, const json& fam) {
    json r = test::evaluate_request(id, "gelu", args, fam, compile_cheat(dir.path(), cheat));
    r["bench"]["threads"] = 1;
    return r;
  };
  auto replies = test::evaluate_directly(
      worker,
      {request("exact", "gelu_exact", family), request("exact_strict", "gelu_exact", strict),
       request("tanh", "gelu_tanh_for_erf", family), request("sigmoid", "gelu_sigmoid_for_erf", family)},
      dir.path(), "--backend cpu --ceiling 1e10");
  REQUIRE(replies.size() == 4);
  INFO(replies["exact"].dump().substr(0, 1500));
  CHECK(replies["exact"]["verdict"] == "accepted");
  CHECK(replies["exact"]["bench"]["speedup_eager"].get<double>() > 0);
  INFO(replies["exact_strict"].dump().substr(0, 1500));
  if (stock_gelu_off(family["tolerance"]["float32"])) {
    CHECK(replies["exact_strict"]["verdict"] == "rejected");
    CHECK(replies["exact_strict"]["reason"] == "wrong_result");
  } else {
    MESSAGE("this CPU's gelu is within the tolerance of float64 on [-3.48, -3.42] (its vector path is not "
            "AVX-512's): the rule is not needed here, so the strict family's rejection is not checked");
  }
  for (const char* id : {"tanh", "sigmoid"}) {
    CAPTURE(id);
    const json& r = replies[id];
    INFO(r.dump().substr(0, 1500));
    CHECK(r["verdict"] == "rejected");
    CHECK(r["reason"] == "wrong_result");
    CHECK(r.value("detail", "").find("float64 gives") != std::string::npos);
  }
}

// The reduce family's compare_float64 on long sums: an honest fp32 order
// (last term first) that differs from torch's cascade sum by more than atol
// where a sum of 4096 terms cancels is accepted with the rule and rejected
// without it; a sum of bf16-rounded terms stays rejected with it.
TEST_CASE("compare_float64 accepts another summation order within stock's error allowance, not a precision drop") {
  FORGE_SKIP_WITHOUT_TORCH();
  test::TempDir dir;
  const fs::path worker = worker_built_by_forge_try(dir.path());
  json family = load_family(kRepo / "targets" / "reduce" / "family.yaml").spec;
  REQUIRE(family.value("compare_float64", false));
  json strict = family;
  strict["compare_float64"] = false;
  const json args = json::array({{{"type", "Tensor"}, {"dtype", "float32"}, {"sizes", {64, 4096, 16}},
                                  {"strides", {65536, 16, 1}}, {"device", "cpu"}, {"name", "self"}},
                                 {{"type", "int[]"}, {"value", {1}}, {"name", "dim"}},
                                 {{"type", "bool"}, {"value", false}, {"name", "keepdim"}},
                                 {{"type", "None"}, {"name", "dtype"}}});
  auto request = [&](const std::string& id, const std::string& cheat, const json& fam) {
    json r = test::evaluate_request(id, "sum", args, fam, compile_cheat(dir.path(), cheat));
    r["overload"] = "dim_IntList";
    r["bench"]["threads"] = 1;
    return r;
  };
  auto replies = test::evaluate_directly(
      worker,
      {request("reverse", "sum_reverse_order", family), request("reverse_strict", "sum_reverse_order", strict),
       request("bf16", "sum_bf16_terms", family)},
      dir.path(), "--backend cpu --ceiling 1e10");
  REQUIRE(replies.size() == 3);
  INFO(replies["reverse"].dump().substr(0, 1500));
  CHECK(replies["reverse"]["verdict"] == "accepted");
  INFO(replies["reverse_strict"].dump().substr(0, 1500));
  CHECK(replies["reverse_strict"]["verdict"] == "rejected");
  CHECK(replies["reverse_strict"]["reason"] == "wrong_result");
  INFO(replies["bf16"].dump().substr(0, 1500));
  CHECK(replies["bf16"]["verdict"] == "rejected");
  CHECK(replies["bf16"]["reason"] == "wrong_result");
  CHECK(replies["bf16"].value("detail", "").find("float64 gives") != std::string::npos);
}

TEST_SUITE_END();
}  // namespace forge
