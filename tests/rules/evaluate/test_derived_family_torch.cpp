// Every op the ABI can express is a target (issue 30): a CPU script with a
// SiLU, a log_softmax, a LayerNorm over a transposed view and a random fill
// and a flip (tests/rules/evaluate/derived/). No family.yaml covers flip:
// its family is derived from the captured call, and nothing proposes for it
// without a model. silu's family (targets/pointwise) and _log_softmax's
// (targets/softmax) verify hand-written kernels through `forge try`, and a
// wrong silu is rejected; layer_norm's family.yaml
// is refined to the captured strides, so a strided kernel is verified on the
// transposed call; the random fill is no target and the report says why.
// Skipped (visibly) where torch is not importable.
#include <doctest/doctest.h>

#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "tests/support.h"

namespace forge {
namespace fs = std::filesystem;
using nlohmann::json;

TEST_SUITE_BEGIN("rules::DerivedFamily");

TEST_CASE("derived families: honest kernels verified through forge try, a wrong one rejected") {
  FORGE_SKIP_WITHOUT_TORCH();
  const fs::path src = fs::path(FORGE_TEST_DIR) / "rules" / "evaluate" / "derived";
  test::TempDir dir;
  fs::copy_file(src / "model.py", dir / "model.py");
  for (const char* k : {"silu", "silu_wrong", "log_softmax", "layer_norm_strided"})
    fs::copy_file(src / (std::string(k) + ".cc"), dir / (std::string(k) + ".cpp"));
  test::write_text(dir / "forge.yaml",
                   "models:\n  m: {run: python model.py, env: {OMP_NUM_THREADS: '1'}}\n"
                   "targets: {top: 0, min_share: 0}\n"
                   "budget: {iterations: 0}\n");  // capture and selection; forge try evaluates
  auto build = test::run_forge("--json build", dir.path());
  INFO(build.err);
  REQUIRE(build.exit_code == 0);
  json r = json::parse(build.out);
  std::map<std::string, json> by_op;
  for (const auto& t : r["targets"]) by_op.emplace(t["op"].get<std::string>(), t);
  for (const char* op : {"silu", "_log_softmax", "native_layer_norm"}) CHECK(by_op.count(op));
  // Searchable, but nothing proposes for a derived family without a model: the
  // report says so. The random fill is no target, and says why.
  REQUIRE(by_op.count("flip"));
  CHECK(by_op["flip"]["selection"] == "no_proposer");
  CHECK(by_op["flip"]["why"].get<std::string>().find("derived") != std::string::npos);
  CHECK(by_op["silu"]["selection"] == "selected");          // the pointwise family's templates apply
  CHECK(by_op["_log_softmax"]["selection"] == "selected");  // the softmax family's
  bool random = false;
  for (const auto& t : r["not_selected"])
    if (t["op"] == "uniform_") random = t["selection"] == "random";
  CHECK(random);

  for (const auto& [target, file] : {std::pair{"m/silu", "silu.cpp"}, std::pair{"m/_log_softmax", "log_softmax.cpp"},
                                     std::pair{"m/native_layer_norm", "layer_norm_strided.cpp"}}) {
    json rec = test::forge_try(dir.path(), target, file);
    CAPTURE(rec.dump());
    CHECK(rec["verdict"] == "accepted");
    CHECK(rec["verify"]["cases"].get<int>() >= 5);  // captured samples, fresh ranges, specials
  }
  json wrong = test::forge_try(dir.path(), "m/silu", "silu_wrong.cpp");
  CAPTURE(wrong.dump());
  CHECK(wrong["verdict"] == "rejected");
  CHECK(wrong["reason"] == "wrong_result");
}

TEST_SUITE_END();
}  // namespace forge
