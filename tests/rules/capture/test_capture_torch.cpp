// Capture for real: the unmodified example scripts, the real capture library
// built against the venv's torch, the real forge binary. Skipped (visibly) where
// torch is not importable.
#include <doctest/doctest.h>

#include <cstdlib>
#include <map>
#include <set>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "store/store.h"
#include "tests/support.h"

namespace forge {
namespace fs = std::filesystem;
using nlohmann::json;

TEST_SUITE_BEGIN("rules::CaptureTorch");

namespace {

const fs::path kRepo = fs::path(FORGE_TEST_DIR).parent_path();


// A copy of examples/tiny with every target selected.
void make_project(const fs::path& dir) {
  for (const char* f : {"cnn.py", "transformer.py"})
    fs::copy_file(kRepo / "examples" / "tiny" / f, dir / f);
  test::write_text(dir / "forge.yaml",
                   "models:\n"
                   "  cnn: {run: python cnn.py --batch 8}\n"
                   "  transformer: {run: python transformer.py}\n"
                   "targets: {top: 0, min_share: 0}\n");
}

std::set<std::string> ops_of(const json& targets) {
  std::set<std::string> ops;
  for (const auto& t : targets) ops.insert(t["op"].get<std::string>());
  return ops;
}

}  // namespace

TEST_CASE("unmodified scripts become ranked targets; an unchanged build does no work") {
  FORGE_SKIP_WITHOUT_TORCH();
  test::TempDir dir;
  make_project(dir.path());

  auto first = test::run_forge("--json capture", dir.path());
  INFO(first.err);
  REQUIRE(first.exit_code == 0);
  json r = json::parse(first.out);
  CHECK(r["ok"] == true);
  CHECK(r["models"]["cnn"]["status"] == "ok");
  CHECK(r["models"]["transformer"]["status"] == "ok");
  auto ops = ops_of(r["targets"]);
  for (const char* op : {"_softmax", "native_group_norm", "native_layer_norm", "mean.dim",
                         "native_batch_norm", "addmm"})
    CHECK_MESSAGE(ops.count(op), "missing target op " << op);
  // The composite spellings are recorded as where the call came from.
  for (const auto& t : r["targets"]) {
    if (t["op"] == "mean.dim") CHECK(t["outer_op"] == "adaptive_avg_pool2d");
    if (t["op"] == "native_group_norm") CHECK(t["outer_op"] == "group_norm");
    CHECK(t["id"].get<std::string>().find('/') != std::string::npos);
    CHECK(t["share"].get<double>() >= 0);
    CHECK(t["bytes"].get<double>() > 0);
  }
  // Ranked by time.
  for (size_t i = 1; i < r["targets"].size(); ++i)
    if (r["targets"][i]["model"] == r["targets"][i - 1]["model"])
      CHECK(r["targets"][i]["time_us"].get<double>() <= r["targets"][i - 1]["time_us"].get<double>());

  auto second = test::run_forge("--json capture", dir.path());
  REQUIRE(second.exit_code == 0);
  json r2 = json::parse(second.out);
  CHECK(r2["steps_run"] == 0);
  CHECK(r2["targets"] == r["targets"]);

  // Status runs the search stage dry, which says why a target is not searched
  // (capture stops before it); everything else is the capture's.
  auto status = test::run_forge("--json status --all", dir.path());
  REQUIRE(status.exit_code == 0);
  const json st = json::parse(status.out);
  auto without_selection = [](json targets) {
    for (auto& t : targets) t.erase("selection"), t.erase("why");
    return targets;
  };
  CHECK(without_selection(st["targets"]) == without_selection(r["targets"]));
  // Every captured op is listed: the weights' random init and views are no
  // targets, and say so; addmm has a derived family and no proposer.
  std::map<std::string, std::string> reason;  // op -> selection, the first signature's
  for (const json* list : {&st["targets"], &st["not_selected"]})
    for (const auto& t : *list) reason.emplace(t["op"].get<std::string>(), t["selection"].get<std::string>());
  CHECK(reason["uniform_"] == "random");
  CHECK(reason["view"] == "view");
  CHECK(reason["addmm"] == "no_proposer");  // a derived family; the library has none
  CHECK(reason["_softmax"] == "selected");

  SUBCASE("editing the script re-captures that model only, and explain says why") {
    test::write_text(dir / "cnn.py", test::read_text(dir / "cnn.py") + "# edited\n");
    auto ex = test::run_forge("explain cnn", dir.path());
    CHECK(ex.exit_code == 0);
    CHECK(ex.out.find("capture cnn: will run") != std::string::npos);
    CHECK(ex.out.find("input 'files' changed") != std::string::npos);
    auto third = test::run_forge("--json capture", dir.path());
    REQUIRE(third.exit_code == 0);
    CHECK(json::parse(third.out)["steps_run"] == 1);
    auto ex2 = test::run_forge("explain transformer", dir.path());
    CHECK(ex2.out.find("capture transformer: up to date") != std::string::npos);
  }

  SUBCASE("a target id prefix works on the command line") {
    std::string id = r["targets"][0]["id"].get<std::string>();
    auto ex = test::run_forge("explain " + id.substr(0, id.size() - 3), dir.path());
    CHECK(ex.exit_code == 0);
    CHECK(ex.out.rfind(id + ":", 0) == 0);
  }

  SUBCASE("saved inputs reload bit-identical") {
    // Find the stem convolution's sample through the capture step's record.
    auto store = store::open_local_store(dir / ".forge", nullptr);
    auto ref = store->get_ref("explain/capture/cnn");
    REQUIRE(ref);
    auto action = store->get_action(json::parse(*ref)["key"].get<std::string>());
    REQUIRE(action);
    std::string digest;
    const json record = json::parse(*action);
    for (const auto& e : record["entries"])
      if (e["op"] == "mkldnn_convolution" &&
          e["signature"].get<std::string>().find("float32[8,3,32,32]") != std::string::npos &&
          !e["samples"].empty())
        digest = e["samples"][0]["inputs"][0]["digest"].get<std::string>();
    REQUIRE_FALSE(digest.empty());
    auto bytes = store->get_object(digest);
    REQUIRE(bytes);
    test::write_text(dir / "x.bin", *bytes);
    // The script's own input, recomputed the way the script makes it.
    test::write_text(dir / "check.py",
                     "import sys, torch\n"
                     "sys.argv = ['cnn.py']\n"
                     "import cnn\n"
                     "torch.manual_seed(0)\n"
                     "cnn.TinyCNN().eval()\n"
                     "x = torch.randn(8, 3, 32, 32)\n"
                     "raw = open('x.bin', 'rb').read()\n"
                     "y = torch.frombuffer(bytearray(raw), dtype=torch.float32).view(8, 3, 32, 32)\n"
                     "sys.exit(0 if torch.equal(x, y) else 1)\n");
    int rc = std::system(("cd '" + dir.path().string() + "' && '" +
                          (kRepo / ".venv/bin/python").string() + "' check.py").c_str());
    CHECK(rc == 0);
  }
}

TEST_CASE("a TorchScript file with an inputs file is captured from C++") {
  FORGE_SKIP_WITHOUT_TORCH();
  test::TempDir dir;
  test::write_text(dir / "export.py",
                   "import torch, torch.nn as nn, torch.nn.functional as F\n"
                   "class M(nn.Module):\n"
                   "    def __init__(self):\n"
                   "        super().__init__()\n"
                   "        self.gn = nn.GroupNorm(4, 16)\n"
                   "    def forward(self, x):\n"
                   "        return torch.softmax(F.adaptive_avg_pool2d(self.gn(x), 1).flatten(1), -1)\n"
                   "torch.jit.script(M().eval()).save('model.pt')\n"
                   "torch.save([torch.randn(2, 16, 8, 8)], 'inputs.pt')\n");
  int rc = std::system(("cd '" + dir.path().string() + "' && '" +
                        (kRepo / ".venv/bin/python").string() + "' export.py").c_str());
  REQUIRE(rc == 0);
  test::write_text(dir / "forge.yaml",
                   "models:\n  ts: {torchscript: model.pt, inputs: inputs.pt}\n"
                   "targets: {top: 0, min_share: 0}\n");
  auto r = test::run_forge("--json capture", dir.path());
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  auto ops = ops_of(json::parse(r.out)["targets"]);
  for (const char* op : {"native_group_norm", "mean.dim", "_softmax"})
    CHECK_MESSAGE(ops.count(op), "missing target op " << op);
}

// A call that throws (RecordFunction still ends it, while unwinding) is not
// recorded: index_select's CPU kernel allocates its output, then finds the
// bad index; the script catches it. Only the good call counts, and the
// sample each bad call took at its start is taken back, so the good call,
// of the same signature, is sampled (two samples per signature allowed).
TEST_CASE("calls that throw are not recorded or sampled; the same signature's good call is") {
  FORGE_SKIP_WITHOUT_TORCH();
  test::TempDir dir;
  test::write_text(dir / "throws.py",
                   "import torch\n"
                   "x = torch.randn(64, 32)\n"
                   "for _ in range(3):\n"
                   "    try:\n"
                   "        torch.index_select(x, 0, torch.tensor([0, 99, 1]))\n"
                   "    except (IndexError, RuntimeError):\n"
                   "        pass\n"
                   "    try:\n"
                   "        torch.cumsum(torch.randn(4, 8), dim=1).index_select(1, torch.tensor([-9]))\n"
                   "    except (IndexError, RuntimeError):\n"
                   "        pass\n"
                   "torch.index_select(x, 0, torch.tensor([0, 3, 5]))\n");
  test::write_text(dir / "forge.yaml", "models:\n  m: {run: python throws.py}\ntargets: {top: 0, min_share: 0}\n");
  auto r = test::run_forge("--json capture", dir.path());
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const json report = json::parse(r.out);
  std::map<std::string, long> calls, samples;
  for (const auto& t : report["targets"]) {
    calls[t["op"].get<std::string>()] += t["calls"].get<long>();
    samples[t["op"].get<std::string>()] += t["samples"].get<long>();
  }
  CAPTURE(report["targets"].dump());
  CHECK(calls["index_select"] == 1);  // 7 calls, 6 threw (3 after a good cumsum)
  CHECK(samples["index_select"] == 1);
  CHECK(calls["cumsum"] == 3);
}

TEST_CASE("a model whose command fails is reported with its output, exit 1") {
  FORGE_SKIP_WITHOUT_TORCH();
  test::TempDir dir;
  test::write_text(dir / "bad.py", "import torch\nraise SystemExit('no weights here')\n");
  test::write_text(dir / "forge.yaml", "models:\n  bad: {run: python bad.py}\n");
  auto r = test::run_forge("build", dir.path());
  CHECK(r.exit_code == 1);
  CHECK(r.out.find("model bad: failed: `python bad.py` exit code 1") != std::string::npos);
}

TEST_SUITE_END();
}  // namespace forge
