// What a reply of the torch.compile baseline helper means for the build
// (rules/evaluate/compile_baseline.h): an op Inductor cannot compile is a
// finding, not a failed build; a helper that crashes, garbles its reply or
// raises on the target is a failed step.
#include <doctest/doctest.h>

#include "rules/evaluate/compile_baseline.h"

namespace forge {
using nlohmann::json;

TEST_SUITE_BEGIN("rules::CompileBaseline");

namespace {
WorkerReply replied(json value) {
  WorkerReply r;
  r.status = WorkerReply::Status::Ok;
  r.value = std::move(value);
  return r;
}
}  // namespace

TEST_CASE("the helper's result is the record") {
  auto rec = helper_record(replied({{"id", 3},
                                    {"result", {{"ok", true},
                                                {"best_mode", "default"},
                                                {"compile_us", {{"median", 5.0}}},
                                                {"eager_us", {{"median", 9.0}}}}}}));
  CHECK(record_ok(rec));
  CHECK(rec["compile_us"]["median"] == 5.0);
  CHECK(rec["best_mode"] == "default");
}

TEST_CASE("an op Inductor compiles in no mode leaves the target without a figure, the build ok") {
  auto rec = helper_record(
      replied({{"id", 1}, {"result", {{"ok", false}, {"error", "default: TorchRuntimeError: x"}, {"modes", json::object()}}}}));
  CHECK(record_ok(rec));
  CHECK_FALSE(rec.contains("compile_us"));
  CHECK(rec["error"] == "default: TorchRuntimeError: x");
}

TEST_CASE("Inductor compiling past the time limit is recorded like an op it cannot compile") {
  WorkerReply slow;
  slow.status = WorkerReply::Status::Timeout;
  slow.reason = "timeout";
  slow.seconds = 900;
  auto rec = helper_record(slow);
  CHECK(record_ok(rec));
  CHECK_FALSE(rec.contains("compile_us"));
  CHECK(rec["error"] == "torch.compile timed out after 900 s");
}

TEST_CASE("a helper that crashes, raises on the target or replies without a result is a failed step") {
  WorkerReply crashed;
  crashed.status = WorkerReply::Status::Crashed;
  crashed.reason = "crashed (signal 11: Segmentation fault)";
  crashed.detail = "Fatal Python error";
  auto rec = helper_record(crashed);
  CHECK_FALSE(record_ok(rec));
  CHECK(rec["reason"].get<std::string>().find("Segmentation fault") != std::string::npos);
  CHECK(rec["detail"] == "Fatal Python error");

  auto raised = helper_record(replied({{"id", 2}, {"error", "Traceback ...\nImportError: no module"}}));
  CHECK_FALSE(record_ok(raised));
  CHECK(raised["detail"].get<std::string>().find("ImportError") != std::string::npos);

  CHECK_FALSE(record_ok(helper_record(replied({{"id", 2}}))));
  CHECK_FALSE(record_ok(helper_record(replied({{"id", 2}, {"result", "not an object"}}))));
}

TEST_CASE("on the CPU only default mode is timed, unless an op of the target could be a GEMM") {
  Target relu;
  relu.op = "relu";
  CHECK(baseline_modes("cpu", relu) == std::vector<std::string>{"default"});
  CHECK(baseline_modes("cuda", relu) == std::vector<std::string>{"default", "max-autotune-no-cudagraphs"});
  Target addmm;
  addmm.op = "addmm";
  CHECK(baseline_modes("cpu", addmm).size() == 2);
  Target chain;
  chain.op = "chain";
  chain.chain = {{"ops", {{{"op", "aten::convolution"}}, {{"op", "aten::relu"}}}}};
  CHECK(baseline_modes("cpu", chain).size() == 2);
  chain.chain = {{"ops", {{{"op", "aten::mul"}}, {{"op", "aten::relu"}}}}};
  CHECK(baseline_modes("cpu", chain) == std::vector<std::string>{"default"});
}

TEST_SUITE_END();

}  // namespace forge
