// The capture stage through the real engine and rules, with every side effect
// faked: cmake "builds" the runtime by creating its files, the model's command
// "runs" by writing a capture file the way the capture library does.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>

#include "engine/build.h"
#include "rules/capture/capture.h"
#include "rules/rules.h"
#include "store/store.h"
#include "tests/engine/fake_runner.h"
#include "tests/support.h"
#include "util/hash.h"

namespace forge {
namespace fs = std::filesystem;
using nlohmann::json;
using test::exited;

TEST_SUITE_BEGIN("rules::Capture");

namespace {

json fake_capture_file(const std::string& op_time_scale, const json& more_ops) {
  double k = std::stod(op_time_scale);
  auto tensor = [](std::vector<int> sizes) {
    return json{{"type", "Tensor"}, {"dtype", "float32"}, {"sizes", sizes}, {"device", "cpu"}};
  };
  return {{"version", 1},
          {"timing", "cpu_wall"},
          {"backend_ops",
           {{{"op", "aten::_softmax"},
             {"overload", ""},
             {"outer_op", "aten::softmax"},
             {"signature", "_softmax(f32[64,1000], -1, False)"},
             {"args", {tensor({64, 1000}), {{"type", "int"}, {"value", -1}}}},
             {"outputs", {tensor({64, 1000})}},
             {"calls", 3},
             {"time_us", 300.0 * k},
             {"samples", {{{"inputs", {{{"file", "s0.bin"}, {"type", "Tensor"}}}}}}}},
            {{"op", "aten::mean"},
             {"overload", "dim"},
             {"outer_op", "aten::adaptive_avg_pool2d"},
             {"signature", "mean.dim(f32[8,32,8,8], [-1,-2], True)"},
             {"args", {tensor({8, 32, 8, 8})}},
             {"outputs", {tensor({8, 32, 1, 1})}},
             {"calls", 3},
             {"time_us", 100.0 * k},
             {"samples", json::array()}}}}};
}

json fake_capture_file(const std::string& op_time_scale) { return fake_capture_file(op_time_scale, json::array()); }

struct World {
  test::TempDir dir;
  std::string scale = "1";
  json more_ops = json::array();  // backend_ops records besides the fake's two
  int exit_code = 0;
  std::unique_ptr<test::FakeRunner> runner;

  World() {
    ::setenv("FORGE_CACHE_DIR", (dir / "cache").c_str(), 1);
    test::write_text(dir / "a.py", "print('a')\n");
    test::write_text(dir / "b.py", "print('b')\n");
    test::write_text(dir / "forge.yaml",
                     "models:\n  a: {run: python a.py}\n  b: {run: python b.py}\n");
    runner = std::make_unique<test::FakeRunner>([this](const Command& c) {
      if (c.argv[0] == "cmake" && c.argv[1] == "--build") {
        test::write_text(fs::path(c.argv[2]) / "libforge_capture.so", "lib");
        test::write_text(fs::path(c.argv[2]) / "forge_run_torchscript", "exe");
        return exited(0);
      }
      if (c.argv[0] == "cmake") return exited(0);
      // The model's command: behave like a process with the capture library loaded.
      fs::path out = c.env.at("FORGE_CAPTURE_DIR");
      test::write_text(out / "s0.bin", "0123456789abcdef");
      json file = fake_capture_file(scale);
      for (const auto& op : more_ops) file["backend_ops"].push_back(op);
      test::write_text(out / "4242.json", file.dump());
      return exited(exit_code, "", exit_code ? "Traceback: boom\n" : "");
    });
  }

  Toolchain toolchain() const {
    Toolchain tc;
    tc.python = "/usr/bin/python3";
    tc.torch_version = "2.14.1";
    tc.cxx = "g++ 12";
    return tc;
  }
  DeviceInfo device() const { return {"cpu", "Test CPU", "x86_64", ""}; }

  // One `forge build` (capture only) on a fresh Builder over the same store.
  json build(Toolchain tc, DeviceInfo dev) {
    Manifest m = load_manifest(dir / "forge.yaml");
    auto store = store::open_local_store(m.store, [](const std::string&) {});
    Progress progress(false);
    Builder builder(*store, progress);
    BuildContext ctx{m, builder, *runner, tc, dev, {}};
    return run_build(ctx, default_rules(true));
  }
  json build() { return build(toolchain(), device()); }
  int captures_of(const std::string& script) const { return runner->count(script); }
};

}  // namespace

TEST_CASE("first build captures every model; an unchanged second build runs no step") {
  World w;
  json first = w.build();
  CHECK(first["ok"] == true);
  CHECK(first["steps_run"] == 4);  // runtime, ceiling, capture a, capture b
  REQUIRE(first["targets"].size() == 4);
  CHECK(first["targets"][0]["op"] == "_softmax");
  CHECK(first["targets"][0]["share"].get<double>() == doctest::Approx(0.75));
  CHECK(first["targets"][0]["id"].get<std::string>().rfind("a/_softmax/", 0) == 0);
  CHECK(first["targets"][1]["op"] == "mean.dim");
  // 64*1000 floats in, 64*1000 out.
  CHECK(first["targets"][0]["bytes"].get<double>() == 512000.0);
  CHECK(first["targets"][0]["iterations"] == 0);
  CHECK(first["targets"][0]["best_speedup_eager"].is_null());

  const int calls = static_cast<int>(w.runner->calls().size());
  json second = w.build();
  CHECK(second["steps_run"] == 0);
  CHECK(second["steps_cached"] == 4);
  CHECK(w.runner->calls().size() == static_cast<size_t>(calls));
  CHECK(second["targets"] == first["targets"]);
}

// The runtime's build folder is shared by every store on the machine: a
// second project finds it finished and runs no cmake; a product gone from it
// (a cleaned cache) configures and builds again.
TEST_CASE("a finished runtime build in the user cache is reused by another store without cmake") {
  World first;
  const fs::path cache = first.dir / "cache";
  first.build();
  CHECK(first.runner->count("cmake") == 2);  // configure, build

  World second;
  ::setenv("FORGE_CACHE_DIR", cache.c_str(), 1);
  json r = second.build();
  CHECK(r["ok"] == true);
  CHECK(second.runner->count("cmake") == 0);
  CHECK(second.captures_of("a.py") == 1);

  fs::path lib;
  for (const auto& f : fs::recursive_directory_iterator(cache))
    if (f.path().filename() == "libforge_capture.so") lib = f.path();
  REQUIRE(!lib.empty());
  fs::remove(lib);
  World third;
  ::setenv("FORGE_CACHE_DIR", cache.c_str(), 1);
  CHECK(third.build()["ok"] == true);
  CHECK(third.runner->count("cmake") == 2);
  CHECK(fs::exists(lib));
}

TEST_CASE("changing one model's script re-captures that model only") {
  World w;
  w.build();
  test::write_text(w.dir / "b.py", "print('b, edited')\n");
  json again = w.build();
  CHECK(again["steps_run"] == 1);
  CHECK(w.captures_of("a.py") == 1);
  CHECK(w.captures_of("b.py") == 2);
}

TEST_CASE("the toolchain and the device invalidate exactly what depends on them") {
  World w;
  w.build();
  SUBCASE("new torch: runtime rebuilt and both models re-captured, ceiling kept") {
    Toolchain tc = w.toolchain();
    tc.torch_version = "2.15.0";
    json r = w.build(tc, w.device());
    CHECK(r["steps_run"] == 3);
    CHECK(r["steps_cached"] == 1);
  }
  SUBCASE("new device: ceiling re-measured and models re-captured, runtime kept") {
    DeviceInfo dev = w.device();
    dev.name = "Another CPU";
    json r = w.build(w.toolchain(), dev);
    CHECK(r["steps_run"] == 3);
    CHECK(r["steps_cached"] == 1);
  }
}

TEST_CASE("a failing model command fails the build, keeps the other model, and is retried") {
  World w;
  w.exit_code = 3;
  json r = w.build();
  CHECK(r["ok"] == false);
  CHECK(r["models"]["a"]["status"] == "failed");
  CHECK(r["models"]["a"]["reason"] == "`python a.py` exit code 3");
  CHECK(r["models"]["a"]["detail"] == "Traceback: boom\n");
  w.exit_code = 0;
  json again = w.build();
  CHECK(again["ok"] == true);
  CHECK(again["steps_run"] == 2);  // both captures, nothing else
}

TEST_CASE("captured sample values land in the object store by digest") {
  World w;
  json r = w.build();
  CHECK(r["targets"][0]["samples"] == 1);
  Manifest m = load_manifest(w.dir / "forge.yaml");
  auto store = store::open_local_store(m.store, [](const std::string&) {});
  CHECK(store->get_object(sha256_hex("0123456789abcdef")) == "0123456789abcdef");
  // The capture's scratch folder is gone.
  CHECK((!fs::exists(m.store / "tmp") || fs::is_empty(m.store / "tmp")));
}

TEST_CASE("the report lists every captured op not selected with its reason; a random-number op takes no top slot") {
  World w;
  auto tensor = [](std::vector<int> sizes) {
    return json{{"type", "Tensor"}, {"dtype", "float32"}, {"sizes", sizes}, {"device", "cpu"}};
  };
  w.more_ops.push_back({{"op", "aten::uniform_"}, {"overload", ""}, {"outer_op", "aten::uniform_"},
                        {"signature", "uniform_(f32[64,1000], 0, 1, None)"},
                        {"args", {tensor({64, 1000}), {{"type", "float"}, {"value", 0}}, {{"type", "float"}, {"value", 1}},
                                  {{"type", "None"}, {"name", "generator"}}}},
                        {"outputs", {tensor({64, 1000})}}, {"calls", 1}, {"time_us", 900.0},
                        {"samples", json::array()}});
  w.more_ops.push_back({{"op", "aten::view"}, {"overload", ""}, {"kind", "view"}, {"outer_op", "aten::view"},
                        {"signature", "view(f32[64,1000], [64000])"}, {"args", {tensor({64, 1000})}},
                        {"outputs", {tensor({64000})}}, {"calls", 1}, {"time_us", 1.0}, {"samples", json::array()}});
  test::write_text(w.dir / "forge.yaml", "models:\n  a: {run: python a.py}\ntargets: {top: 1}\n");
  json r = w.build();
  REQUIRE(r["targets"].size() == 1);
  CHECK(r["targets"][0]["op"] == "_softmax");
  CHECK(r["targets"][0]["selection"] == "selected");
  REQUIRE(r["not_selected"].size() == 3);
  CHECK(r["not_selected"][0]["op"] == "uniform_");
  CHECK(r["not_selected"][0]["selection"] == "random");
  CHECK(r["not_selected"][1]["op"] == "mean.dim");
  CHECK(r["not_selected"][1]["selection"] == "beyond_top");
  CHECK(r["not_selected"][2]["selection"] == "view");
  CHECK(r["models"]["a"]["signatures"] == 4);
  CHECK(r["models"]["a"]["selected"] == 1);
  CHECK(r["models"]["a"]["not_selected"] == json{{"beyond_top", 1}, {"random", 1}, {"view", 1}});
}

TEST_CASE("targets selection: ops list, top-N and minimum share") {
  std::vector<Target> all(3);
  all[0].id = "m/_softmax/aaaaaa", all[0].op = "_softmax", all[0].time_us = 50;
  all[1].id = "m/mean.dim/bbbbbb", all[1].op = "mean.dim", all[1].time_us = 45;
  all[2].id = "m/add.Tensor/cccccc", all[2].op = "add.Tensor", all[2].time_us = 5;
  TargetSelection sel;
  sel.min_share = 0;
  sel.top = 0;
  CHECK(select_targets(all, sel).size() == 3);
  sel.top = 2;
  CHECK(select_targets(all, sel).size() == 2);
  sel.top = 0;
  sel.min_share = 0.10;
  CHECK(select_targets(all, sel).size() == 2);
  sel.min_share = 0;
  sel.ops = {"mean"};
  auto only = select_targets(all, sel);
  REQUIRE(only.size() == 1);
  CHECK(only[0].op == "mean.dim");
  CHECK(only[0].share == doctest::Approx(0.45));
}

TEST_SUITE_END();
}  // namespace forge

namespace forge {
TEST_SUITE_BEGIN("rules::Capture");

TEST_CASE("on a GPU only the CUDA kernels become targets; CPU wall time is not mixed in") {
  auto entry = [](const char* op, const char* key, double us) {
    return json{{"op", op},          {"dispatch_key", key}, {"signature", std::string(op) + "()"},
                {"kind", "kernel"},  {"calls", 1},          {"time_us", us},
                {"args", json::array()}, {"samples", json::array()}};
  };
  json record{{"entries",
               {entry("uniform_", "CPU", 36944), entry("cudnn_convolution", "CUDA", 300),
                entry("native_batch_norm", "CUDA", 100), entry("empty_strided", "CUDA", 0)}},
              {"time_us_by_dispatch_key", {{"CPU", 36944}, {"CUDA", 400}}}};
  record["entries"][3]["kind"] = "alloc";
  auto cuda = targets_from_capture("r", record, std::nullopt, "cuda");
  REQUIRE(cuda.size() == 4);  // every captured signature, each with its selection
  CHECK(cuda[0].selection == Selection::HostOp);
  CHECK(cuda[3].selection == Selection::Alloc);
  std::vector<Target> candidates;
  for (const auto& t : cuda)
    if (t.selection == Selection::Selected) candidates.push_back(t);
  REQUIRE(candidates.size() == 2);
  auto ranked = select_targets(candidates, TargetSelection{{}, 0, 0}, 400);
  CHECK(ranked[0].op == "cudnn_convolution");
  CHECK(ranked[0].share == doctest::Approx(0.75));
  auto cpu = targets_from_capture("r", record, std::nullopt, "cpu");
  REQUIRE(cpu.size() == 4);
  CHECK(cpu[0].op == "uniform_");
  CHECK(cpu[0].selection == Selection::Random);  // weights' random init: no target
  CHECK(cpu[1].selection == Selection::HostOp);  // CUDA ops in a CPU model's record
}

TEST_CASE("a host-to-device copy (weights moved at set-up) is no target; a device copy is") {
  auto tensor = [](const char* device) {
    return json{{"type", "Tensor"}, {"device", device}, {"dtype", "float32"}, {"sizes", {4}}, {"strides", {1}}};
  };
  auto copy = [&](const char* sig, const char* src) {
    return json{{"op", "copy_"},   {"dispatch_key", "CUDA"}, {"signature", sig}, {"kind", "kernel"},
                {"calls", 1},      {"time_us", 500.0},       {"args", {tensor("cuda:0"), tensor(src)}},
                {"outputs", {tensor("cuda:0")}}, {"samples", json::array()}};
  };
  json record{{"entries", {copy("upload", "cpu"), copy("d2d", "cuda:0")}}};
  auto targets = targets_from_capture("m", record, std::nullopt, "cuda");
  REQUIRE(targets.size() == 2);
  CHECK(targets[0].selection == Selection::Transfer);
  CHECK(targets[0].why == "copies between cpu and cuda: bound by the link between them, not by a kernel");
  CHECK(targets[1].signature == "d2d");
  CHECK(targets[1].selection == Selection::Selected);
  CHECK(is_transfer(json::array({tensor("cuda:1"), tensor("cuda:0")}), json::array()) == false);
}

TEST_SUITE_END();
}  // namespace forge
