#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

#include "util/hash.h"

namespace forge {

TEST_SUITE_BEGIN("util::Hash");

TEST_CASE("sha256 digests are pinned") {
  CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(is_sha256_hex(sha256_hex("x")));
  CHECK_FALSE(is_sha256_hex("ABC"));
}

TEST_CASE("typed sections: boundaries and order matter") {
  auto h = [](std::vector<std::pair<std::string, std::string>> parts) {
    Hasher hasher;
    for (const auto& [t, v] : parts) hasher.add(t, v);
    return hasher.hex();
  };
  CHECK(h({{"flags", "-I"}, {"flags", "-O2"}}) != h({{"flags", "-I-O2"}}));
  CHECK(h({{"a", "1"}, {"b", "2"}}) != h({{"b", "2"}, {"a", "1"}}));
  CHECK(h({{"a", "1"}}) == h({{"a", "1"}}));
}

TEST_SUITE_END();
}  // namespace forge
