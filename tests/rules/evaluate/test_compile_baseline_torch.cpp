// The torch.compile baseline helper (runtime/compile_bench) on a real op with a
// keyword-only argument: mean.dim's dtype (ResNet-50's adaptive_avg_pool2d
// reaches mean.dim). Passing it positionally made Dynamo reject every mean.dim
// target on the H200. Skipped (visibly) where torch is not importable.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "rules/evaluate/compile_baseline.h"
#include "tests/support.h"

namespace forge {
namespace fs = std::filesystem;
using nlohmann::json;

TEST_SUITE_BEGIN("rules::CompileBaselineTorch");

namespace {
// The helper run on `req` as forge runs it; its JSON reply.
json run_helper(const test::TempDir& dir, const json& req) {
  const fs::path repo = fs::path(FORGE_TEST_DIR).parent_path();
  test::write_text(dir / "req.json", req.dump());
  const std::string cmd = "'" + (repo / ".venv" / "bin" / "python").string() + "' '" +
                          (repo / "runtime" / "compile_bench" / "forge_compile_bench.py").string() +
                          "' '" + (dir / "req.json").string() + "' > '" + (dir / "out.json").string() +
                          "' 2> '" + (dir / "err.txt").string() + "'";
  REQUIRE_MESSAGE(std::system(cmd.c_str()) == 0, test::read_text(dir / "err.txt"));
  return json::parse(test::read_text(dir / "out.json"));
}
}  // namespace

TEST_CASE("the compile baseline times an op whose captured arguments include a keyword-only one") {
  FORGE_SKIP_WITHOUT_TORCH();
  test::TempDir dir;
  json req = {{"op", "aten::mean"},
              {"overload", "dim"},
              {"args", {{{"type", "Tensor"}, {"dtype", "float32"}, {"sizes", {2, 16, 7, 7}},
                         {"strides", {784, 49, 7, 1}}, {"device", "cpu"}},
                        {{"type", "int[]"}, {"value", {-1, -2}}},
                        {{"type", "bool"}, {"value", true}},
                        {{"type", "None"}}}},
              {"modes", {"default"}},
              {"bench", {{"warmup", 1}, {"reps", 3}, {"min_seconds", 0}}}};
  json out = run_helper(dir, req);
  CHECK_MESSAGE(out["ok"] == true, out.dump());
  CHECK(out["best_mode"] == "default");
  CHECK(out["compile_us"]["median"].get<double>() > 0);
  CHECK(out["eager_us"]["median"].get<double>() > 0);
}

TEST_CASE("the compile baseline reads a large input's partial sample, tiled as the worker tiles it") {
  FORGE_SKIP_WITHOUT_TORCH();
  test::TempDir dir;
  // The capture stored 2 of the tensor's 64 rows (runtime/common/sample_part.h).
  std::string raw;
  for (int i = 0; i < 2 * 8; ++i) {
    const float v = 0.25f * static_cast<float>(i) - 1.0f;
    raw.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  test::write_text(dir / "x.bin", raw);
  json req = {{"op", "aten::_softmax"},
              {"overload", ""},
              {"args", {{{"type", "Tensor"}, {"dtype", "float32"}, {"sizes", {64, 8}},
                         {"strides", {8, 1}}, {"device", "cpu"}},
                        {{"type", "int"}, {"value", -1}},
                        {{"type", "bool"}, {"value", false}}}},
              {"samples", {{{"inputs", {{{"file", (dir / "x.bin").string()}}, json(nullptr), json(nullptr)}}}}},
              {"modes", {"default"}},
              {"bench", {{"warmup", 1}, {"reps", 3}, {"min_seconds", 0}}}};
  json out = run_helper(dir, req);
  CHECK_MESSAGE(out["ok"] == true, out.dump());
  CHECK(out["compile_us"]["median"].get<double>() > 0);
}

TEST_CASE("one helper process serves a build's targets; a target it raises on fails alone") {
  FORGE_SKIP_WITHOUT_TORCH();
  test::TempDir dir;
  const fs::path repo = fs::path(FORGE_TEST_DIR).parent_path();
  WorkerCommand c;
  c.argv = {(repo / ".venv" / "bin" / "python").string(),
            (repo / "runtime" / "compile_bench" / "forge_compile_bench.py").string(), "--serve"};
  c.log = dir / "helper.log";
  WorkerProcess helper(c);
  const json x = {{"type", "Tensor"}, {"dtype", "float32"}, {"sizes", {4, 8}}, {"strides", {8, 1}}, {"device", "cpu"}};
  const json bench = {{"warmup", 1}, {"reps", 3}, {"min_seconds", 0}};
  json relu = {{"op", "aten::relu"}, {"overload", ""}, {"args", {x}}, {"modes", {"default"}}, {"bench", bench}};
  json wrong = {{"op", "aten::no_such_op"}, {"overload", ""}, {"args", {x}}, {"modes", {"default"}}, {"bench", bench}};
  const json first = helper_record(helper.request(relu, 300));
  CHECK_MESSAGE(first.value("ok", false), first.dump());
  CHECK(first["compile_us"]["median"].get<double>() > 0);
  const json failed = helper_record(helper.request(wrong, 300));
  CHECK_FALSE(record_ok(failed));
  CHECK(failed["detail"].get<std::string>().find("no_such_op") != std::string::npos);
  const json again = helper_record(helper.request(relu, 300));
  CHECK_MESSAGE(again.value("ok", false), again.dump());
  CHECK(helper.starts() == 1);
}

TEST_SUITE_END();

}  // namespace forge
