// The package guard's bound on a signature family's varied dims (issue 29,
// item 3): a package.json entry carries the worker's verify.vary_max, and the
// guard takes a varied extent in 1..vary_max, or, for an entry packaged
// without one, the captured extent only. No torch: the bound
// (runtime/common/signature_family.h, what libforge.so's guard calls) and the
// packager's carry (package_vary_max). The torch.compile routing has no bound
// of its own: it asks libforge.so's guard (tests/runtime/package/test_guard_torch.cpp
// checks a call just beyond vary_max both ways).
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "rules/package/package.h"
#include "runtime/common/signature_family.h"

namespace forge {
using nlohmann::json;
using family::verified_bounds;
using family::within_verified;

TEST_SUITE_BEGIN("rules::PackageVaryBound");

namespace {

// A package.json entry as the packager writes it: native_layer_norm's input
// [4, 128, 64] with dim 0 varying (plus, with `two`, dim 1 of arg 0 too).
json entry(const json& vary_max, bool two = false) {
  json e = {{"target", "app/native_layer_norm"},
            {"args", {{{"type", "Tensor"}, {"dtype", "float32"}, {"device", "cpu"}, {"sizes", {4, 128, 64}},
                       {"strides", {8192, 64, 1}}},
                      {{"type", "int[]"}, {"value", {64}}}}},
            {"vary", two ? json{{{"arg", 0}, {"dim", 0}}, {{"arg", 0}, {"dim", 1}}} : json{{{"arg", 0}, {"dim", 0}}}}};
  if (!vary_max.is_null()) e["vary_max"] = vary_max;
  return e;
}

struct Case {
  json entry;
  std::vector<int64_t> extent;
  bool within;
};

std::vector<Case> cases() {
  return {
      // verified up to 64 rows: 1..64, not 0 or 65
      {entry({64}), {1}, true},
      {entry({64}), {4}, true},
      {entry({64}), {64}, true},
      {entry({64}), {65}, false},
      {entry({64}), {0}, false},
      {entry({64}), {-1}, false},  // not seen
      // no vary_max (a record from before the worker reported it): the captured 4 rows only
      {entry(nullptr), {4}, true},
      {entry(nullptr), {3}, false},
      {entry(nullptr), {5}, false},
      {entry(nullptr), {1}, false},
      // malformed: as if absent
      {entry({64, 64}), {5}, false},  // one too many
      {entry({64, 64}), {4}, true},
      {entry(json::array()), {5}, false},
      {entry({0}), {5}, false},
      {entry({-3}), {5}, false},
      {entry({64.5}), {5}, false},
      {entry({"64"}), {5}, false},
      {entry({true}), {1}, false},
      {entry(json::object()), {5}, false},
      {entry(7), {5}, false},
      // two varied dims, each with its own bound
      {entry({16, 256}, true), {16, 256}, true},
      {entry({16, 256}, true), {17, 128}, false},
      {entry({16, 256}, true), {2, 257}, false},
      {entry(nullptr, true), {4, 128}, true},
      {entry(nullptr, true), {4, 129}, false},
      // nothing varies: nothing to bound
      {[] {
         json e = entry(nullptr);
         e["vary"] = json::array();
         return e;
       }(),
       {},
       true},
      // a dim counted from the end: the guard never sees one varied
      {[] {
         json e = entry(nullptr);
         e["vary"] = {{{"arg", 0}, {"dim", -1}}};
         return e;
       }(),
       {64},
       false},
      // a vary entry that names no captured dim: never inside
      {[] {
         json e = entry(nullptr);
         e["vary"] = {{{"arg", 1}, {"dim", 0}}};
         return e;
       }(),
       {1},
       false},
  };
}

}  // namespace

TEST_CASE("the bound: 1..vary_max per varied dim, the captured extent alone without vary_max") {
  for (const auto& c : cases()) {
    INFO(c.entry.dump() << " extent " << json(c.extent).dump());
    CHECK(within_verified(verified_bounds(c.entry), c.extent) == c.within);
  }
  std::string problem;
  auto b = verified_bounds(entry({64}), &problem);
  REQUIRE(b.size() == 1);
  CHECK(b[0].lo == 1);
  CHECK(b[0].hi == 64);
  CHECK(problem.empty());
  b = verified_bounds(entry(nullptr), &problem);
  REQUIRE(b.size() == 1);
  CHECK(b[0].lo == 4);
  CHECK(b[0].hi == 4);
  CHECK(problem.find("no vary_max") != std::string::npos);
  verified_bounds(entry({64, 64}), &problem);
  CHECK(problem == "vary_max has 2 entries for 1 signature_family.vary entries");
  verified_bounds(entry({0}), &problem);
  CHECK(problem == "vary_max entry 0 is not a positive integer");
  // An extent list of another length (a guard bug) matches nothing.
  CHECK_FALSE(within_verified(verified_bounds(entry({64})), {}));
}

TEST_CASE("the packager carries the accepted record's verify.vary_max, and says when it cannot") {
  const json vary = {{{"arg", 0}, {"dim", 0}}};
  std::string problem;
  CHECK(package_vary_max({{"cases", 40}, {"vary_max", {64}}}, vary, &problem) == json({64}));
  CHECK(problem.empty());
  // A record from before the worker reported it: nothing carried, the guard takes the captured extent.
  CHECK(package_vary_max({{"cases", 16}}, vary, &problem).is_null());
  CHECK(problem.find("no verify.vary_max") != std::string::npos);
  CHECK(package_vary_max(nullptr, vary, &problem).is_null());
  CHECK(problem.find("no verify.vary_max") != std::string::npos);
  // Malformed: not carried, and named.
  CHECK(package_vary_max({{"vary_max", {64, 8}}}, vary, &problem).is_null());
  CHECK(problem == "its evaluation record's verify.vary_max has 2 entries for 1 signature_family.vary entries");
  CHECK(package_vary_max({{"vary_max", {"64"}}}, vary, &problem).is_null());
  CHECK(problem.find("not a positive integer") != std::string::npos);
  // A family that varies nothing has nothing to bound, and nothing to say.
  CHECK(package_vary_max({{"vary_max", json::array()}}, json::array(), &problem).is_null());
  CHECK(problem.empty());
  // What is carried, the guard reads back as the same bound.
  json e = entry(nullptr);
  e["vary_max"] = package_vary_max({{"vary_max", {16}}}, vary);
  CHECK(within_verified(verified_bounds(e), {16}));
  CHECK_FALSE(within_verified(verified_bounds(e), {17}));
}

TEST_SUITE_END();
}  // namespace forge
