// The samples digest of an evaluation step (rules/evaluate/evaluate.h): a
// partial sample's fields count; a whole sample's digest covers only the
// fields a whole sample has, so stores written without them stay valid.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "engine/target.h"
#include "rules/evaluate/evaluate.h"
#include "util/hash.h"

namespace forge {
using nlohmann::json;

TEST_SUITE_BEGIN("rules::SamplesDigest");

TEST_CASE("whole samples hash their files only; a partial one its fields too") {
  Target t;
  t.sample_inputs = json::array({{{"inputs", json::array({{{"digest", "aa"}, {"nbytes", 128}}, {{"type", "int"}}})}}});
  Hasher old;
  old.add("arg", "aa").add("arg", "");
  CHECK(samples_digest(t) == old.hex());

  Target p = t;
  p.sample_inputs[0]["inputs"][0]["stored_numel"] = 8;
  p.sample_inputs[0]["inputs"][0]["sampling"] = "leading";
  const std::string partial = samples_digest(p);
  CHECK(partial != samples_digest(t));
  p.sample_inputs[0]["inputs"][0]["stored_numel"] = 16;
  CHECK(samples_digest(p) != partial);
  p.sample_inputs[0]["inputs"][0]["stored_numel"] = 8;
  p.sample_inputs[0]["inputs"][0]["max"] = 9;
  CHECK(samples_digest(p) != partial);
}

TEST_SUITE_END();

}  // namespace forge
