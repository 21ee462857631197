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

TEST_CASE("every target left out carries its reason; one left out before ranking takes no place in the top") {
  std::vector<Target> ts(5);
  ts[0].id = "m/uniform_/000000", ts[0].op = "uniform_", ts[0].time_us = 500;
  leave_out(ts[0], Selection::Random, "draws random numbers");
  ts[1].id = "m/a/111111", ts[1].op = "a", ts[1].time_us = 300;
  ts[2].id = "m/b/222222", ts[2].op = "b", ts[2].time_us = 150;
  ts[3].id = "m/c/333333", ts[3].op = "c", ts[3].time_us = 49;
  ts[4].id = "m/d/444444", ts[4].op = "d", ts[4].time_us = 1;
  TargetSelection sel;
  sel.top = 1;
  sel.min_share = 0.01;
  std::vector<Target> left;
  auto out = select_targets(ts, sel, 0, &left);
  REQUIRE(out.size() == 1);
  CHECK(out[0].op == "a");  // the random-number op, ranked first, took no place
  CHECK(out[0].selection == Selection::Selected);
  CHECK(out[0].why.empty());
  REQUIRE(left.size() == 4);
  CHECK(left[0].selection == Selection::Random);
  CHECK(left[0].share == doctest::Approx(0.5));  // shares are computed for every op
  CHECK(left[1].selection == Selection::BeyondTop);
  CHECK(left[1].why == "ranked 2 by time; targets.top keeps 1 per model");
  CHECK(left[2].selection == Selection::BeyondTop);
  CHECK(left[3].selection == Selection::BelowMinShare);
  CHECK(left[3].why == "0.1% of the model's op time, under targets.min_share (1%)");

  sel.top = 0;
  sel.ops = {"b"};
  left.clear();
  out = select_targets(ts, sel, 0, &left);
  REQUIRE(out.size() == 1);
  CHECK(out[0].op == "b");
  CHECK(left[1].selection == Selection::NotInOps);
  CHECK(left[1].why == "targets.ops in forge.yaml does not name a");

  auto j = target_json(left[0]);
  CHECK(j["selection"] == "random");
  CHECK(j["why"] == "draws random numbers");
  CHECK(target_json(out[0])["selection"] == "selected");
  CHECK(target_json(out[0])["why"].is_null());
}

TEST_CASE("a name that is a captured op but no target says why") {
  std::vector<Target> ts(1), others(2);
  ts[0].id = "cnn/_softmax/3fa2c1";
  others[0].id = "cnn/uniform_/aaaaaa";
  leave_out(others[0], Selection::Random, "draws random numbers");
  others[1].id = "cnn/uniform_/bbbbbb";
  leave_out(others[1], Selection::Random, "draws random numbers");
  try {
    resolve_target(ts, "cnn/uniform_/a", others);
    FAIL("expected an error");
  } catch (const UsageError& e) {
    CHECK(std::string(e.what()) == "'cnn/uniform_/aaaaaa' is not a target (random): draws random numbers; "
                                   "`forge status --all` lists every captured op");
  }
  // Two such ops by that prefix: the usual unknown-target error.
  CHECK_THROWS_WITH_AS(resolve_target(ts, "cnn/uniform_", others),
                       doctest::Contains("unknown target 'cnn/uniform_'"), UsageError);
}

TEST_SUITE_END();
}  // namespace forge
