// Inputs a call changes (issue 30): training-mode batch norm updates
// running_mean and running_var although its schema marks no write. The
// capture sees the change, the worker verifies the new values as outputs a
// kernel must return (an honest kernel accepted; one that leaves them, or
// writes them into its read-only inputs, rejected), and libforge.so writes
// them back, so the user's module ends with the statistics stock would give.
// An in-place op (relu_, whose schema marks self written and returned) gets
// self back, changed. Skipped (visibly) where torch is not importable.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "tests/runtime/package/package_library.h"
#include "tests/support.h"

namespace forge {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const char* kRelu = R"(#include "forge_kernel.h"
int forge_kernel(const forge_call* c) {
  const forge_tensor* x = &c->inputs[0];
  int64_t n = 1;
  for (int d = 0; d < x->ndim; ++d) n *= x->sizes[d];
  for (int64_t i = 0; i < n; ++i) {
    float v = ((const float*)x->data)[i];
    ((float*)c->outputs[0].data)[i] = v > 0 ? v : 0;
  }
  return 0;
}
)";

const char* kRun = R"(import json, os, sys, torch
torch.set_num_threads(1)
torch.ops.load_library(os.path.join(sys.argv[1], "libforge.so"))  # as forge run loads it
torch.manual_seed(0)
x = torch.randn(4, 8, 6, 6)
bn = torch.nn.BatchNorm2d(8)
ref = torch.nn.BatchNorm2d(8).double()  # float64: outside the entry, stock computes it
with torch.no_grad():
    for _ in range(3):
        y = bn(x)
        r = ref(x.double())
    v = torch.randn(16)
    w = torch.relu_(v)
    u = torch.randn(10)  # outside relu_'s signature: stock
    torch.relu_(u)
out = {"y": (y.double() - r).abs().max().item(),
       "running_mean": (bn.running_mean.double() - ref.running_mean).abs().max().item(),
       "running_var": (bn.running_var.double() - ref.running_var).abs().max().item(),
       "moved": ref.running_mean.abs().max().item(),
       "relu_is_self": w.data_ptr() == v.data_ptr(), "relu_min": v.min().item(), "stock_relu_min": u.min().item()}
print("RESULT " + json.dumps(out))
)";

json tensor(std::vector<int64_t> sizes, bool changed = false) {
  std::vector<int64_t> strides(sizes.size(), 1);
  for (size_t d = sizes.size(); d-- > 1;) strides[d - 1] = strides[d] * sizes[d];
  json t = {{"type", "Tensor"}, {"dtype", "float32"}, {"device", "cpu"}, {"sizes", sizes}, {"strides", strides}};
  if (changed) t["changed"] = true;
  return t;
}

json entry(const std::string& op, json args, json outputs, const std::string& kernel) {
  return {{"target", "app/" + op}, {"op", "aten::" + op},        {"overload", ""},
          {"args", std::move(args)}, {"outputs", std::move(outputs)}, {"vary", json::array()},
          {"pins", json::array()},  {"contiguous", true},           {"vary_outputs", json::array()},
          {"stock_threads", 1},     {"kernel", "kernels/" + kernel}};
}

}  // namespace

TEST_SUITE_BEGIN("rules::ChangedInputs");

TEST_CASE("batch norm's running statistics: captured as changed, verified as outputs") {
  FORGE_SKIP_WITHOUT_TORCH();
  const fs::path src = fs::path(FORGE_TEST_DIR) / "rules" / "evaluate" / "changed";
  test::TempDir dir;
  fs::copy_file(src / "model.py", dir / "model.py");
  for (const char* k : {"batch_norm_train", "batch_norm_no_update", "batch_norm_in_place"})
    fs::copy_file(src / (std::string(k) + ".cc"), dir / (std::string(k) + ".cpp"));
  test::write_text(dir / "forge.yaml",
                   "models:\n  m: {run: python model.py, env: {OMP_NUM_THREADS: '1'}}\n"
                   "targets: {ops: [native_batch_norm], top: 0, min_share: 0}\n"
                   "budget: {iterations: 0}\n");
  auto build = test::run_forge("--json build", dir.path());
  INFO(build.err);
  REQUIRE(build.exit_code == 0);
  auto attempt = [&](const std::string& file) { return test::forge_try(dir.path(), "m/native_batch_norm", file); };
  json honest = attempt("batch_norm_train.cpp");
  CAPTURE(honest.dump());
  CHECK(honest["verdict"] == "accepted");
  CHECK(honest["verify"]["cases"].get<int>() >= 5);
  json kept = attempt("batch_norm_no_update.cpp");
  CAPTURE(kept.dump());
  CHECK(kept["verdict"] == "rejected");
  CHECK(kept["reason"] == "wrong_result");
  CHECK(kept["detail"].get<std::string>().find("input running_mean, which the call changes") != std::string::npos);
  json in_place = attempt("batch_norm_in_place.cpp");
  CAPTURE(in_place.dump());
  CHECK(in_place["verdict"] == "rejected");
  CHECK(in_place["reason"] == "input_modified");
}

TEST_CASE("libforge.so writes a changed input back, and returns an in-place op's self") {
  FORGE_SKIP_WITHOUT_TORCH();
  std::string why;
  const fs::path lib = test::package_library(&why);
  REQUIRE_MESSAGE(!lib.empty(), why);
  const fs::path repo = fs::path(FORGE_TEST_DIR).parent_path();
  const fs::path src = fs::path(FORGE_TEST_DIR) / "rules" / "evaluate" / "changed";
  test::TempDir dir;
  const fs::path pkg = dir / "package";
  fs::create_directories(pkg / "kernels");
  fs::copy_file(lib, pkg / "libforge.so");
  test::write_text(dir / "relu.c", kRelu);
  const std::string inc = " -I'" + (repo / "runtime" / "abi").string() + "' ";
  const std::string cc_bn = "c++ -shared -fPIC -O1" + inc + "-x c++ '" + (src / "batch_norm_train.cc").string() +
                            "' -o '" + (pkg / "kernels" / "bn.so").string() + "'";
  const std::string cc_relu = "cc -shared -fPIC -O1" + inc + "'" + (dir / "relu.c").string() + "' -o '" +
                              (pkg / "kernels" / "relu.so").string() + "'";
  REQUIRE(std::system(cc_bn.c_str()) == 0);
  REQUIRE(std::system(cc_relu.c_str()) == 0);
  const json bn = entry("native_batch_norm",
                        {tensor({4, 8, 6, 6}), tensor({8}), tensor({8}), tensor({8}, true), tensor({8}, true),
                         {{"type", "bool"}, {"value", true}},
                         {{"type", "float"}, {"value", 0.1}},
                         {{"type", "float"}, {"value", 1e-5}}},
                        {tensor({4, 8, 6, 6}), tensor({8}), tensor({8})}, "bn.so");
  const json relu = entry("relu_", {tensor({16}, true)}, {tensor({16})}, "relu.so");
  test::write_text(pkg / "package.json", json{{"backend", "cpu"}, {"entries", {bn, relu}}}.dump(1));
  test::write_text(dir / "run.py", kRun);
  fs::create_directories(dir / "report");
  const fs::path out = dir / "out.txt";
  const std::string cmd = "cd '" + dir.path().string() + "' && FORGE_PACKAGE_REPORT='" + (dir / "report").string() +
                          "' '" + (repo / ".venv/bin/python").string() + "' run.py '" + pkg.string() + "' > '" +
                          out.string() + "' 2>&1";
  const int rc = std::system(cmd.c_str());
  const std::string text = test::read_text(out);
  INFO(text);
  REQUIRE(rc == 0);
  const auto at = text.find("RESULT ");
  REQUIRE(at != std::string::npos);
  const json got = json::parse(text.substr(at + 7, text.find('\n', at) - at - 7));
  CHECK(got["moved"].get<double>() > 1e-3);  // three updates moved the statistics
  CHECK(got["running_mean"].get<double>() < 1e-5);
  CHECK(got["running_var"].get<double>() < 1e-5);
  CHECK(got["y"].get<double>() < 1e-4);
  CHECK(got["relu_is_self"] == true);
  CHECK(got["relu_min"].get<double>() >= 0);
  // Both went through the forged kernels, not stock.
  json report;
  for (const auto& f : fs::directory_iterator(dir / "report")) report = json::parse(test::read_text(f.path()));
  REQUIRE(report.is_object());
  std::map<std::string, long> forged;
  for (const auto& e : report["entries"]) forged[e["target"].get<std::string>()] = e["forged"].get<long>();
  CHECK(forged["app/native_batch_norm"] == 3);
  CHECK(forged["app/relu_"] == 1);
  // relu_ has no family.yaml (a derived family): the 10-element call falls
  // back to stock like any family's call outside its signature.
  CHECK(got["stock_relu_min"].get<double>() >= 0);
  std::string fallbacks = report["fallback"].dump();
  INFO(fallbacks);
  CHECK(fallbacks.find("relu_") != std::string::npos);
  CHECK(fallbacks.find("Float[10]") != std::string::npos);
}

TEST_SUITE_END();
}  // namespace forge
