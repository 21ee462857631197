// The dtype table (runtime/common/dtypes.h): names, sizes and ABI codes.
#include <doctest/doctest.h>

#include <set>
#include <string>

#include "runtime/common/dtypes.h"

namespace forge {

TEST_SUITE_BEGIN("runtime::Dtypes");

TEST_CASE("each name once, with its size and ABI code") {
  std::set<std::string> names;
  for (const auto& d : dtypes::kAll) {
    CAPTURE(std::string(d.name));
    CHECK(names.insert(std::string(d.name)).second);
    CHECK(d.bytes > 0);
  }
  CHECK(dtypes::bytes("float32") == 4);
  CHECK(dtypes::bytes("bfloat16") == 2);
  CHECK(dtypes::bytes("complex128") == 16);
  CHECK(dtypes::bytes("bool") == 1);
  CHECK(dtypes::bytes("float") == 0);  // torch's alias is not a name forge writes
  CHECK(dtypes::find("bfloat16")->abi == FORGE_BFLOAT16);
  CHECK(dtypes::find("nope") == nullptr);
}

TEST_CASE("the ABI's ten dtypes, and only those, are in_abi") {
  int in = 0;
  for (const auto& d : dtypes::kAll) in += dtypes::in_abi(d.name);
  CHECK(in == 10);
  for (const char* name : {"float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool"})
    CHECK(dtypes::in_abi(name));
  CHECK_FALSE(dtypes::in_abi("uint16"));
  CHECK_FALSE(dtypes::in_abi("complex64"));
}

TEST_SUITE_END();

}  // namespace forge
