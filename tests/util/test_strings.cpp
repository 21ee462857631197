#include <doctest/doctest.h>

#include "util/strings.h"

namespace forge {

TEST_SUITE_BEGIN("util::Strings");

TEST_CASE("edit distance and did-you-mean") {
  CHECK(edit_distance("budget", "budgt") == 1);
  CHECK(edit_distance("", "abc") == 3);
  CHECK(closest_match("biuld", {"build", "status", "clean"}) == "build");
  CHECK(closest_match("frobnicate", {"build", "status"}) == "");
}

TEST_SUITE_END();
}  // namespace forge
