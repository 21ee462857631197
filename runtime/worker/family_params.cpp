// The worker's view of a family (family_params.h).
#include "family_params.h"

#include <algorithm>

namespace forge::worker {
namespace {

[[noreturn]] void fail(const std::string& what) { throw RequestError(what); }

}  // namespace

Family parse_family(const json& fam) {
  Family f;
  if (fam.is_null()) return f;
  if (!fam.is_object()) fail("\"family\" must be an object");
  try {
    if (fam.contains("verify") && fam["verify"].is_object()) {
      const json& v = fam["verify"];
      if (v.contains("edge_sizes")) f.edge_sizes = v["edge_sizes"].get<std::vector<int64_t>>();
      if (v.contains("ranges")) {
        f.ranges.clear();
        for (const auto& r : v["ranges"]) {
          if (!r.is_array() || r.size() != 2) fail("family.verify.ranges entries must be [lo, hi]");
          f.ranges.emplace_back(r[0].get<double>(), r[1].get<double>());
        }
        if (f.ranges.empty()) f.ranges.emplace_back(-3.0, 3.0);
      }
      if (v.contains("seeds")) f.seeds = std::max(1, v["seeds"].get<int>());
      if (v.contains("specials")) f.specials = v["specials"].get<std::vector<std::string>>();
      if (v.contains("keep_args")) f.keep_args = v["keep_args"].get<std::vector<int>>();
      if (v.contains("int_range")) {
        auto r = v["int_range"].get<std::vector<int64_t>>();
        if (r.size() != 2) fail("family.verify.int_range must be [lo, hi)");
        f.int_range = {r[0], r[1]};
      }
    }
    if (fam.contains("signature_family")) f.sig = family::parse(fam["signature_family"]);
    if (fam.contains("tolerance") && fam["tolerance"].is_object()) f.tolerance = fam["tolerance"];
    if (fam.contains("compare_float64")) {
      if (!fam["compare_float64"].is_boolean()) fail("family.compare_float64 must be true or false");
      f.compare_float64 = fam["compare_float64"].get<bool>();
    }
  } catch (const json::exception& e) {
    fail(std::string("malformed \"family\": ") + e.what());
  }
  return f;
}

}  // namespace forge::worker
