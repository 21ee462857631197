// The capture's partial samples (runtime/common/sample_part.h).
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "runtime/common/sample_part.h"

namespace forge {

TEST_SUITE_BEGIN("runtime::SamplePart");

using Sizes = std::vector<int64_t>;

TEST_CASE("a tensor that fits is stored whole") {
  CHECK(sample_part::stored_numel(Sizes{4, 8}, 32) == 32);
  CHECK(sample_part::stored_numel(Sizes{4, 8}, 1000) == 32);
  CHECK(sample_part::stored_numel(Sizes{}, 1) == 1);        // a 0-dim tensor
  CHECK(sample_part::stored_numel(Sizes{0, 1 << 20}, 1) == 0);  // no elements
}

TEST_CASE("a larger one keeps as many whole trailing blocks as fit") {
  CHECK(sample_part::stored_numel(Sizes{256, 128}, 1000) == 7 * 128);         // 7 rows
  CHECK(sample_part::stored_numel(Sizes{8, 3, 32, 32}, 3000) == 2 * 1024);    // 2 planes
  CHECK(sample_part::stored_numel(Sizes{8, 3, 32, 32}, 5000) == 3072);        // the largest block: 1 image
  CHECK(sample_part::stored_numel(Sizes{8, 3, 32, 32}, 7000) == 2 * 3072);    // 2 images
  CHECK(sample_part::stored_numel(Sizes{4096, 393216}, 16 << 20) == 42 * 393216);
  // A last dim longer than the limit: a prefix of the first row.
  CHECK(sample_part::stored_numel(Sizes{4, 1000}, 300) == 300);
  // Unit dims count as fitting: the block is the same.
  CHECK(sample_part::stored_numel(Sizes{100, 1, 10}, 55) == 50);
  CHECK(sample_part::stored_numel(Sizes{100, 10, 1}, 55) == 50);
  // Never nothing.
  CHECK(sample_part::stored_numel(Sizes{10}, 0) == 1);
  for (int64_t limit : {1, 7, 64, 100, 999})
    for (const Sizes& s : {Sizes{33, 17}, Sizes{5, 6, 7}, Sizes{1000}}) {
      const int64_t n = sample_part::stored_numel(s, limit);
      CHECK(n >= 1);
      CHECK(n <= limit);
      int64_t numel = 1;
      for (int64_t x : s) numel *= x;
      if (n < numel) CHECK(2 * n > limit);  // a partial sample uses at least half the limit
    }
}

TEST_CASE("the per-tensor limit is a share of the cap, and the origin says what was stored") {
  CHECK(sample_part::tensor_limit_bytes(int64_t(1) << 30) == int64_t(64) << 20);
  CHECK(sample_part::tensor_limit_bytes(0) == 1);
  CHECK(sample_part::origin(32, 32) == "captured");
  CHECK(sample_part::origin(896, 32768) == "captured (tiled from 896 of 32768 elements)");
}

TEST_SUITE_END();

}  // namespace forge
