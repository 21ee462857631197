// The build report's end-to-end line (cli/report.cpp): a steady-state gain past
// the capture's Amdahl bound says what the bound counts, so the two figures do
// not read as a contradiction.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/report.h"
#include "tests/support.h"

namespace forge {
using nlohmann::json;

TEST_SUITE_BEGIN("cli::Report");

namespace {
// What print_build_report writes to stdout.
std::string printed(const json& report) {
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
    cli::print_build_report(report);
  } catch (...) {
    restore();
    throw;
  }
  restore();
  return test::read_text(dir / "out.txt");
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

TEST_SUITE_END();

}  // namespace forge
