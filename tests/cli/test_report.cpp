// The build report's end-to-end line (cli/report.cpp): a steady-state gain past
// the capture's Amdahl bound says what the bound counts, so the two figures do
// not read as a contradiction.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/report.h"
#include "engine/target.h"
#include "tests/support.h"

namespace forge {
using nlohmann::json;

TEST_SUITE_BEGIN("cli::Report");

namespace {
// What `print` writes to stdout.
template <typename F>
std::string printed_by(F print) {
  test::TempDir dir;
  std::fflush(stdout);
  const int saved = ::dup(1);
  std::FILE* f = std::fopen((dir / "out.txt").c_str(), "w");
  REQUIRE((f && saved >= 0));
  ::dup2(::fileno(f), 1);
  auto restore = [&] {
    std::fflush(stdout);
    ::dup2(saved, 1);
    ::close(saved);
    std::fclose(f);
  };
  try {
    print();
  } catch (...) {
    restore();
    throw;
  }
  restore();
  return test::read_text(dir / "out.txt");
}

// What print_build_report writes to stdout.
std::string printed(const json& report) {
  return printed_by([&] { cli::print_build_report(report); });
}

json report_with(double speedup, double bound) {
  json model = {{"status", "ok"},         {"forged_calls", 56},    {"fallback_calls", 91},
                {"mismatches", 0},        {"stock_latency", 13.84}, {"forged_latency", 7.43},
                {"speedup", speedup},     {"significant", true},    {"amdahl_bound", bound}};
  json package = {{"status", "ok"}, {"library", "/p/libforge.so"}, {"entries", 3},
                  {"models", json::object({{"vae", model}})}};
  // run_build()'s shape (engine/build.cpp), without models or targets.
  return {{"ok", true},
          {"steps_run", 1},
          {"steps_cached", 0},
          {"device", {{"backend", "cuda"}, {"name", "NVIDIA H200"}, {"arch", "sm_90a"}}},
          {"torch", "2.11.0"},
          {"models", json::object()},
          {"targets", json::array()},
          {"notes", json::array()},
          {"history", nullptr},
          {"package", package}};
}
}  // namespace

TEST_CASE("a gain past the Amdahl bound says the bound counts the whole captured run") {
  const std::string past = printed(report_with(1.86, 1.70));
  CHECK(past.find("vae: 56 forged calls, 91 fell back, 0 mismatches") != std::string::npos);
  CHECK(past.find("Amdahl bound 1.70× over the whole captured run, set-up included") != std::string::npos);
  const std::string within = printed(report_with(1.20, 1.70));
  CHECK(within.find("Amdahl bound 1.70×)") != std::string::npos);
  CHECK(within.find("set-up included") == std::string::npos);
}

TEST_CASE("calls a CPU kernel left to stock for the thread count are named under the model") {
  json report = report_with(1.00, 1.04);
  CHECK(printed(report).find("of the fallbacks") == std::string::npos);
  report["package"]["models"]["vae"]["more_threads_calls"] = 6;
  CHECK(printed(report).find("    6 of the fallbacks were in a CPU kernel's family: torch had more intra-op "
                             "threads than stock had") != std::string::npos);
  CHECK(printed(report).find("OMP_NUM_THREADS: '1'}` in models.vae uses them") != std::string::npos);
}

TEST_CASE("a target not searched says why; the models line counts what was not selected, by reason") {
  json report = report_with(1.0, 2.0);
  report["package"] = nullptr;
  report["models"] = {{"cnn",
                       {{"status", "ok"}, {"calls", 10}, {"processes", 1}, {"time_us", 100.0}, {"timing", "cpu_wall"},
                        {"signatures", 5}, {"selected", 1}, {"not_selected", {{"random", 1}, {"view", 3}}}}}};
  Target t;
  t.id = "cnn/native_group_norm/abc123";
  t.share = 0.5;
  leave_out(t, Selection::NoProposer, "no strategy applies at this shape; nearest: rows");
  report["targets"] = json::array({target_json(t)});
  const std::string out = printed(report);
  CHECK(out.find("1 of 5 captured signatures selected") != std::string::npos);
  CHECK(out.find("model cnn: not selected: 1 random, 3 view (`forge status --all` lists them with why)") !=
        std::string::npos);
  CHECK(out.find("cnn/native_group_norm/abc123         not searched (no_proposer): no strategy applies at this "
                 "shape; nearest: rows\n") != std::string::npos);
}

TEST_CASE("a searched target's outcomes and rejections are printed under the table") {
  json report = report_with(1.0, 2.0);
  report["package"] = nullptr;
  Target t;
  t.id = "m/add.Tensor/90c891";
  t.share = 0.05;
  json row = target_json(t);
  row["iterations"] = 2;
  row["outcomes"] = {{"wrong_result", 1}, {"not_faster", 1}};
  // Long keys: a dangling items() over a destroyed copy reads freed strings.
  const std::string why(200, 'w');
  row["rejections"] = {{"declined: " + why, 1}, {"wrong_result: " + why, 3}};
  report["targets"] = json::array({row});
  const std::string out = printed(report);
  CHECK(out.find("m/add.Tensor/90c891                  outcomes: not_faster 1, wrong_result 1\n") !=
        std::string::npos);
  CHECK(out.find("1× declined: " + why + "\n") != std::string::npos);
  CHECK(out.find("3× wrong_result: " + why + "\n") != std::string::npos);
}

TEST_CASE("status --all lists each op not selected with its reason and why") {
  json ops = json::array({{{"id", "cnn/uniform_/0a0a0a"}, {"share", 0.02}, {"calls", 4}, {"time_us", 12.0},
                           {"selection", "random"}, {"why", "draws random numbers"},
                           {"signature", "uniform_(f32[8,3,3,3], -0.5, 0.5, None)"}}});
  const std::string out = printed_by([&] { cli::print_not_selected(ops); });
  CHECK(out.find("not selected: 1 captured op signature(s)") != std::string::npos);
  CHECK(out.find("cnn/uniform_/0a0a0a") != std::string::npos);
  CHECK(out.find("random           uniform_(f32[8,3,3,3], -0.5, 0.5, None)") != std::string::npos);
  CHECK(out.find("   draws random numbers\n") != std::string::npos);
  CHECK(printed_by([] { cli::print_not_selected(json::array()); }).empty());
}

// Each chain's reason is printed under that chain, before the next chain.
TEST_CASE("each chain's why is printed under that chain") {
  const json chains = json::array(
      {{{"model", "cnn"}, {"ops", {"native_group_norm", "silu", "add.Tensor"}}, {"share", 0.096}, {"calls", 6},
        {"time_us", 4498}, {"id", "cnn/chain/a36fc3"}, {"why", "not searched: no fused kernel"}},
       {{"model", "transformer"}, {"ops", {"div.Tensor", "_softmax"}}, {"share", 0.304}, {"calls", 6},
        {"time_us", 5249}, {"id", "transformer/chain/3d16da"}, {"why", "searched with the library's fused kernel"}}});
  const std::string out = printed_by([&] { cli::print_chains(chains); });
  INFO(out);
  const size_t cnn = out.find("cnn/chain/a36fc3"), cnn_why = out.find("not searched: no fused kernel");
  const size_t tr = out.find("transformer/chain/3d16da"), tr_why = out.find("searched with the library's");
  REQUIRE(cnn != std::string::npos);
  REQUIRE(tr != std::string::npos);
  CHECK(cnn < cnn_why);
  CHECK(cnn_why < tr);
  CHECK(tr < tr_why);
}

TEST_SUITE_END();

}  // namespace forge
