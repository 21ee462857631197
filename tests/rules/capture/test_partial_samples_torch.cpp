// Inputs larger than the capture's per-tensor limit are stored in part, not
// dropped (docs/CAPTURE.md, "Samples"): a script whose softmax input and index
// tensor exceed a tiny cap is captured with both samples within it, the index
// tensor's whole range recorded, and `forge try` verifies an honest softmax on
// the tiled sample, saying so in the case list. Skipped (visibly) where torch
// is not importable.
#include <doctest/doctest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "store/store.h"
#include "tests/support.h"

namespace forge {
namespace fs = std::filesystem;
using nlohmann::json;

TEST_SUITE_BEGIN("rules::PartialSamples");

TEST_CASE("huge inputs are sampled within the cap, tiled by the worker and marked so") {
  FORGE_SKIP_WITHOUT_TORCH();
  test::TempDir dir;
  // The cap: 64,000 bytes, so 4,000 per tensor (sample_part.h): 7 of x's 256
  // rows of 128 floats, and 500 of idx's 4,000 indices (the first 500 are all
  // 0; the whole tensor's range is [0, 9]).
  test::write_text(dir / "model.py",
                   "import torch\n"
                   "torch.manual_seed(0)\n"
                   "x = torch.randn(256, 128)\n"
                   "y = torch.softmax(x, -1)\n"
                   "w = torch.randn(10, 4)\n"
                   "idx = torch.cat([torch.zeros(3000), torch.full((1000,), 9.0)]).long()\n"
                   "z = torch.index_select(w, 0, idx)\n"
                   "print(float(y.sum()), float(z.sum()))\n");
  fs::copy_file(fs::path(FORGE_TEST_DIR) / "adversarial" / "cpu" / "softmax_ok.cc", dir / "softmax_ok.cpp");
  test::write_text(dir / "forge.yaml",
                   "models:\n  m: {run: python model.py, env: {OMP_NUM_THREADS: '1'}}\n"
                   "targets: {top: 0, min_share: 0}\n"
                   "capture: {max_input_mb_per_model: 0.064}\n");
  auto cap = test::run_forge("--json capture", dir.path());
  INFO(cap.err);
  REQUIRE(cap.exit_code == 0);

  auto store = store::open_local_store(dir / ".forge", nullptr);
  auto ref = store->get_ref("explain/capture/m");
  REQUIRE(ref);
  auto action = store->get_action(json::parse(*ref)["key"].get<std::string>());
  REQUIRE(action);
  const json record = json::parse(*action);
  int64_t written = 0;
  json softmax_in, index_in;
  for (const auto& e : record["entries"])
    for (const auto& s : e["samples"])
      for (const auto& in : s["inputs"]) {
        if (!in.is_object() || !in.contains("digest")) continue;
        auto bytes = store->get_object(in["digest"].get<std::string>());
        REQUIRE(bytes);
        CHECK(static_cast<int64_t>(bytes->size()) == in["nbytes"].get<int64_t>());
        written += static_cast<int64_t>(bytes->size());
        if (e["op"] == "_softmax") softmax_in = in;
        if (e["op"] == "index_select" && in["dtype"] == "int64") index_in = in;
      }
  CHECK(written <= 64000);
  CAPTURE(softmax_in.dump());
  CAPTURE(index_in.dump());
  REQUIRE(softmax_in.is_object());
  CHECK(softmax_in["sampling"] == "leading");
  CHECK(softmax_in["stored_numel"] == 7 * 128);
  CHECK(softmax_in["nbytes"] == 7 * 128 * 4);
  CHECK(softmax_in["sizes"] == json::array({256, 128}));
  CHECK_FALSE(softmax_in.contains("min"));  // floating: no range
  REQUIRE(index_in.is_object());
  CHECK(index_in["stored_numel"] == 500);
  CHECK(index_in["min"] == 0);
  CHECK(index_in["max"] == 9);  // the whole tensor's, not the stored block's

  json rec = test::forge_try(dir.path(), "m/_softmax", "softmax_ok.cpp");
  CAPTURE(rec.dump());
  CHECK(rec["verdict"] == "accepted");
  bool seen = false;
  for (const auto& c : rec["verify"]["case_list"])
    if (c["case"] == "sample 0") {
      seen = true;
      CHECK(c["inputs"] == json::array({"captured (tiled from 896 of 32768 elements)"}));
    }
  CHECK(seen);
}

TEST_SUITE_END();
}  // namespace forge
