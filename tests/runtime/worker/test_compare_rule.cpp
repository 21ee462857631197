// The comparison's torch-free rule (runtime/worker/compare_rule.h), directly:
// which tolerance an output is held to, and how detail texts write numbers
// and indices. The tensor side (compare.cpp) is exercised by the worker's
// suites (tests/adversarial).
#include <doctest/doctest.h>

#include <limits>

#include "runtime/worker/compare_rule.h"

namespace forge::worker {

TEST_SUITE_BEGIN("runtime::CompareRule");

namespace {

Family with_tolerance(const char* text) { return parse_family(json::parse(text)); }

void check(Tolerance t, double atol, double rtol) {
  CHECK(t.atol == doctest::Approx(atol));
  CHECK(t.rtol == doctest::Approx(rtol));
}

}  // namespace

TEST_CASE("the output's own dtype first, then the first floating input's, then the default per dtype") {
  const Family f = with_tolerance(R"({"tolerance": {"float32": {"atol": 1e-6, "rtol": 1e-5},
                                                      "bfloat16": {"atol": 0.016, "rtol": 0.016},
                                                      "int64": {"atol": 1, "rtol": 1},
                                                      "float16": "not an object"}})");
  check(tolerance_for(f, "float32", true, std::nullopt), 1e-6, 1e-5);
  check(tolerance_for(f, "bfloat16", true, "float32"), 0.016, 0.016);
  // float16's entry is no object: the input's (float32) applies.
  check(tolerance_for(f, "float16", true, "float32"), 1e-6, 1e-5);
  check(tolerance_for(f, "float16", true, std::nullopt), 1e-3, 1e-3);
  check(tolerance_for(f, "float64", true, "float64"), 1e-12, 1e-10);
  // A non-floating output is compared exactly, whatever the family says.
  check(tolerance_for(f, "int64", false, "float32"), 0, 0);
  check(tolerance_for(f, "bool", false, std::nullopt), 0, 0);

  const Family none;
  check(tolerance_for(none, "bfloat16", true, std::nullopt), 4e-3, 1.6e-2);
  check(tolerance_for(none, "float32", true, "bfloat16"), 1e-6, 1e-5);
  check(tolerance_for(none, "float8_e4m3fn", true, std::nullopt), 1e-6, 1e-5);
  // Missing atol or rtol in an entry: 0.
  check(tolerance_for(with_tolerance(R"({"tolerance": {"float32": {"rtol": 0.5}}})"), "float32", true, std::nullopt),
        0, 0.5);
}

TEST_CASE("indices are written row-major over the sizes; a size 0 counts as 1") {
  const std::vector<int64_t> sizes = {2, 3, 4};
  CHECK(index_text(sizes, 0) == "[0,0,0]");
  CHECK(index_text(sizes, 23) == "[1,2,3]");
  CHECK(index_text(sizes, 5) == "[0,1,1]");
  CHECK(index_text(std::vector<int64_t>{}, 0) == "[]");
  CHECK(index_text(std::vector<int64_t>{0, 5}, 3) == "[0,3]");
}

TEST_CASE("numbers: %g with the digits asked for, and nan and inf by name") {
  CHECK(number_text(0.1) == "0.1");
  CHECK(number_text(1.0 / 3) == "0.333333");
  CHECK(number_text(1.0 / 3, 9) == "0.333333333");
  CHECK(number_text(1e-12) == "1e-12");
  CHECK(number_text(std::numeric_limits<double>::quiet_NaN()) == "nan");
  CHECK(number_text(std::numeric_limits<double>::infinity()) == "inf");
  CHECK(number_text(-std::numeric_limits<double>::infinity()) == "-inf");
}

TEST_SUITE_END();

}  // namespace forge::worker
