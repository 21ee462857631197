#include <doctest/doctest.h>

#include "engine/target.h"
#include "util/error.h"

namespace forge {

TEST_SUITE_BEGIN("engine::Target");

TEST_CASE("ids are <model>/<op>/<6 hex of the signature>, stable") {
  std::string id = make_target_id("resnet50", "_softmax", "_softmax(float32[64,1000]{1000,1}@cpu, -1, False)");
  CHECK(id.rfind("resnet50/_softmax/", 0) == 0);
  CHECK(id.size() == std::string("resnet50/_softmax/").size() + 6);
  CHECK(id == make_target_id("resnet50", "_softmax", "_softmax(float32[64,1000]{1000,1}@cpu, -1, False)"));
  CHECK(id != make_target_id("resnet50", "_softmax", "_softmax(float32[64,1001]{1001,1}@cpu, -1, False)"));
  // Pinned: ids appear in scripts and git history, they must never drift.
  CHECK(signature_hash("abc") == "ba7816");
}

TEST_CASE("any unique prefix names a target, as with git") {
  std::vector<Target> ts(3);
  ts[0].id = "cnn/_softmax/3fa2c1";
  ts[1].id = "cnn/mean.dim/77aa00";
  ts[2].id = "cnn/mean.dim/77ab11";
  CHECK(&resolve_target(ts, "cnn/_softmax/3fa2c1") == &ts[0]);
  CHECK(&resolve_target(ts, "cnn/_s") == &ts[0]);
  CHECK(&resolve_target(ts, "cnn/mean.dim/77aa") == &ts[1]);
  SUBCASE("ambiguous") {
    try {
      resolve_target(ts, "cnn/mean");
      FAIL("expected an error");
    } catch (const UsageError& e) {
      CHECK(std::string(e.what()) ==
            "target 'cnn/mean' is ambiguous: cnn/mean.dim/77aa00 cnn/mean.dim/77ab11");
    }
  }
  SUBCASE("unknown, with a suggestion") {
    try {
      resolve_target(ts, "cnn/_sofmax/3fa2c1");
      FAIL("expected an error");
    } catch (const UsageError& e) {
      CHECK(std::string(e.what()) ==
            "unknown target 'cnn/_sofmax/3fa2c1' (did you mean 'cnn/_softmax/3fa2c1'?); "
            "`forge status` lists them");
    }
  }
}

TEST_CASE("shares and the Amdahl bound are computed over all targets before selection") {
  std::vector<Target> ts(2);
  ts[0].id = "m/a/000000", ts[0].time_us = 75;
  ts[1].id = "m/b/111111", ts[1].time_us = 25;
  TargetSelection sel;
  sel.top = 1;
  auto out = select_targets(ts, sel);
  REQUIRE(out.size() == 1);
  CHECK(out[0].share == doctest::Approx(0.75));
  CHECK(out[0].amdahl == doctest::Approx(4.0));
  auto j = target_json(out[0]);
  CHECK(j["best_speedup_eager"].is_null());
  CHECK(j["best_speedup_compile"].is_null());
  CHECK(j["floor_pct"].is_null());
  CHECK(j["iterations"] == 0);
}

TEST_SUITE_END();
}  // namespace forge
