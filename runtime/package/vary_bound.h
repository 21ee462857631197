// The verified bound on a signature family's varied dims (issue 29, item 3):
// the package's guard takes a call whose varied extents the worker verified,
// and no other. Torch-free, so that libforge.so (override.cpp), the packager
// (rules/package/package.cpp, which carries the bound into package.json) and the
// fast tests (tests/rules/package/test_vary_bound.cpp) share it.
//
// A package.json entry's `vary_max` is the accepted evaluation record's
// `verify.vary_max`: one integer per `signature_family.vary` entry, in that
// order, the largest extent of that dim the worker verified (it verified every
// extent 1..64 and more below it). An entry packaged without one (a record
// from before the worker reported it) is trusted with the captured extent
// only: the signature as captured, never any other size.
//
// The signature-family rule is written in several places today, not unified:
// the worker's cases (runtime/worker/cases.cpp, plan_cases: which extents
// are verified; the worker's verify record reports vary_max), libforge.so's guard (runtime/package/
// override.cpp, matches(), which calls within_verified below), and its
// Python mirror for torch.compile (runtime/autoload/forge_autoload/
// compile.py, _matches() and _within_verified(), the same bound); the family
// file itself is loaded by rules/evaluate/family.cpp. A change to the bound changes
// both within_verified functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace forge::package {

// The extents one vary entry is trusted with: lo..hi (empty when hi < lo).
struct VaryBound {
  int64_t lo = 1, hi = 0;
};

// What is wrong with `vary_max` for a family with `n_vary` vary entries ("" when
// it is well-formed): an array of n_vary positive integers.
template <class Json>
std::string vary_max_problem(const Json& vary_max, size_t n_vary) {
  if (!vary_max.is_array()) return "vary_max is not an array";
  if (vary_max.size() != n_vary)
    return "vary_max has " + std::to_string(vary_max.size()) + " entries for " + std::to_string(n_vary) +
           " signature_family.vary entries";
  for (const auto& v : vary_max)
    if (!v.is_number_integer() || v.template get<int64_t>() < 1)
      return "vary_max entry " + v.dump() + " is not a positive integer";
  return "";
}

// The bounds of a package.json entry, one per `vary` entry: 1..vary_max[k],
// or, with no vary_max (or a malformed one: *problem says why), the captured
// extent of that dim alone (args[arg].sizes[dim]; none when the entry names
// no captured tensor dim, which the guard never matches anyway).
template <class Json>
std::vector<VaryBound> verified_bounds(const Json& entry, std::string* problem = nullptr) {
  const Json none = Json::array();
  const Json& vary = entry.contains("vary") && entry["vary"].is_array() ? entry["vary"] : none;
  std::vector<VaryBound> out(vary.size());
  std::string why = entry.contains("vary_max") ? vary_max_problem(entry["vary_max"], vary.size())
                                               : "no vary_max (a record from before the worker reported it)";
  if (problem) *problem = vary.empty() ? "" : why;
  for (size_t k = 0; k < vary.size(); ++k) {
    if (why.empty()) {
      out[k] = {1, entry["vary_max"][k].template get<int64_t>()};
      continue;
    }
    const Json& v = vary[k];
    if (!v.is_object() || !v.contains("arg") || !v.contains("dim") || !v["arg"].is_number_integer() ||
        !v["dim"].is_number_integer() || !entry.contains("args"))
      continue;
    const Json& args = entry["args"];
    const int64_t arg = v["arg"].template get<int64_t>(), dim = v["dim"].template get<int64_t>();
    if (!args.is_array() || arg < 0 || static_cast<size_t>(arg) >= args.size()) continue;
    const Json& rec = args[arg];
    if (!rec.is_object() || !rec.contains("sizes") || !rec["sizes"].is_array()) continue;
    const Json& sizes = rec["sizes"];
    if (dim < 0 || static_cast<size_t>(dim) >= sizes.size() || !sizes[dim].is_number_integer()) continue;
    const int64_t captured = sizes[dim].template get<int64_t>();
    out[k] = {captured, captured};
  }
  return out;
}

// Is every varied extent of a call inside its bound? extent[k] is the call's
// extent of vary entry k (-1: not seen). Extents below 1 never are: an empty
// batch goes to stock. The Python twin: _within_verified in compile.py.
inline bool within_verified(const std::vector<VaryBound>& bounds, const std::vector<int64_t>& extent) {
  if (extent.size() != bounds.size()) return false;
  for (size_t k = 0; k < bounds.size(); ++k)
    if (extent[k] < 1 || extent[k] < bounds[k].lo || extent[k] > bounds[k].hi) return false;
  return true;
}

}  // namespace forge::package
