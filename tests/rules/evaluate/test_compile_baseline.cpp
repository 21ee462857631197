// What a run of the torch.compile baseline helper means for the build
// (rules/evaluate/compile_baseline.h): an op Inductor cannot compile is a finding, not a
// failed build; a helper that crashes or prints no JSON is a failure.
#include <doctest/doctest.h>

#include "rules/evaluate/compile_baseline.h"

namespace forge {

TEST_SUITE_BEGIN("rules::CompileBaseline");

namespace {
CommandResult exited(int code, std::string out) {
  CommandResult r;
  r.status = CommandResult::Status::Exited;
  r.exit_code = code;
  r.out = std::move(out);
  return r;
}
}  // namespace

TEST_CASE("the helper's JSON is the record; what Inductor prints before it is skipped") {
  auto rec = baseline_record(exited(0, "W1130 a warning from Inductor\n"
                                       "{\"ok\": true, \"best_mode\": \"default\", "
                                       "\"compile_us\": {\"median\": 5.0}, \"eager_us\": {\"median\": 9.0}}\n"));
  CHECK(record_ok(rec));
  CHECK(rec["compile_us"]["median"] == 5.0);
  CHECK(rec["best_mode"] == "default");
}

TEST_CASE("an op Inductor compiles in no mode leaves the target without a figure, the build ok") {
  auto rec = baseline_record(
      exited(0, "{\"ok\": false, \"error\": \"default: TorchRuntimeError: x\", \"modes\": {}}\n"));
  CHECK(record_ok(rec));
  CHECK_FALSE(rec.contains("compile_us"));
  CHECK(rec["error"] == "default: TorchRuntimeError: x");
}

TEST_CASE("Inductor compiling past the time limit is recorded like an op it cannot compile") {
  CommandResult slow;
  slow.status = CommandResult::Status::TimedOut;
  slow.seconds = 900;
  auto rec = baseline_record(slow);
  CHECK(record_ok(rec));
  CHECK_FALSE(rec.contains("compile_us"));
  CHECK(rec["error"].get<std::string>().find("timed out") != std::string::npos);
}

TEST_CASE("a helper that fails or prints no JSON is a failed step") {
  CommandResult crashed = exited(1, "");
  crashed.err = "Traceback: ImportError";
  auto rec = baseline_record(crashed);
  CHECK_FALSE(record_ok(rec));
  CHECK(rec["detail"].get<std::string>().find("ImportError") != std::string::npos);
  CHECK_FALSE(record_ok(baseline_record(exited(0, "no json here\n"))));
}

TEST_SUITE_END();

}  // namespace forge
