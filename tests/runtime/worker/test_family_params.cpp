// The worker's view of a family (runtime/worker/family_params.h): the request's
// "family" into the parameters the cases are planned from, with the exact
// errors a malformed one gets.
#include <doctest/doctest.h>

#include "runtime/worker/family_params.h"

namespace forge::worker {

TEST_SUITE_BEGIN("runtime::FamilyParams");

namespace {

std::string error_of(const json& family) {
  try {
    parse_family(family);
  } catch (const RequestError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("defaults: one seed, the range [-3, 3], ints in [0, 16), no signature family") {
  for (const json& j : {json(nullptr), json::object()}) {
    const Family f = parse_family(j);
    CHECK(f.seeds == 1);
    CHECK(f.ranges == std::vector<std::pair<double, double>>{{-3.0, 3.0}});
    CHECK(f.int_range == std::pair<int64_t, int64_t>{0, 16});
    CHECK(f.edge_sizes.empty());
    CHECK(f.specials.empty());
    CHECK(f.sig.vary.empty());
    CHECK(f.tolerance == json::object());
    CHECK_FALSE(f.compare_float64);
  }
}

TEST_CASE("a family file's keys, as the request carries them") {
  const Family f = parse_family(json::parse(R"({
      "verify": {"edge_sizes": [1, 3], "ranges": [[0, 1], [-100, 100]], "seeds": 0, "specials": ["nan"],
                 "int_range": [-4, 4]},
      "signature_family": {"vary": [{"arg": 0, "dim": 0}], "pins": [{"arg": 3, "vary": 0}]},
      "tolerance": {"float32": {"atol": 1e-6, "rtol": 1e-5}}, "compare_float64": true})"));
  CHECK(f.edge_sizes == std::vector<int64_t>{1, 3});
  CHECK(f.ranges == std::vector<std::pair<double, double>>{{0, 1}, {-100, 100}});
  CHECK(f.seeds == 1);  // at least one
  CHECK(f.specials == std::vector<std::string>{"nan"});
  CHECK(f.int_range == std::pair<int64_t, int64_t>{-4, 4});
  REQUIRE(f.sig.pins.size() == 1);
  CHECK(f.sig.pins[0].arg == 3);
  CHECK(f.tolerance["float32"]["rtol"].get<double>() == doctest::Approx(1e-5));
  CHECK(f.compare_float64);
  // An empty list of ranges keeps the default one.
  CHECK(parse_family(json::parse(R"({"verify": {"ranges": []}})")).ranges.size() == 1);
}

TEST_CASE("a malformed family is a request error saying what is wrong") {
  CHECK(error_of(json::array()) == "\"family\" must be an object");
  CHECK(error_of(json::parse(R"({"verify": {"ranges": [[1]]}})")) == "family.verify.ranges entries must be [lo, hi]");
  CHECK(error_of(json::parse(R"({"verify": {"int_range": [1, 2, 3]}})")) == "family.verify.int_range must be [lo, hi)");
  CHECK(error_of(json::parse(R"({"compare_float64": 1})")) == "family.compare_float64 must be true or false");
  CHECK(error_of(json::parse(R"({"signature_family": {"vary": [{"arg": 0}]}})"))
            .starts_with("malformed \"family\": "));
}

TEST_SUITE_END();

}  // namespace forge::worker
