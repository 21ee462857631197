// The signature-family rule: which calls one verified kernel may be trusted
// with (targets/<family>/family.yaml's `signature_family`, docs/CANDIDATE_ABI.md).
// A call is inside the family of a captured signature when every argument
// equals the captured one (dtype, device, rank, values), except that
//   - `vary` [{arg, dim}]: these tensor dims may take another extent, within
//     what the worker verified (`vary_max`, below; an empty one never),
//   - `pins` [{arg, vary}]: this int argument must equal the extent of vary
//     entry `vary` (group_norm's N is its input's dim 0), not its captured value,
//   - `contiguous` (default true): any contiguous strides and storage offset;
//     false: the captured strides exactly, at storage offset 0;
// and `vary_outputs` [k]: output k's dim 0 follows vary entry 0's extent.
//
// Written once, here, torch-free, and used by
//   - the engine: rules/evaluate/family.cpp validates family.yaml with parse()
//     and problem(); rules/package/ writes to_json() into package.json;
//   - the worker (runtime/worker): parse_family() reads it, the edge cases
//     sweep each varied dim and set its pinned ints (cases.cpp), the verify
//     record reports vary_max;
//   - libforge.so's guard (runtime/package/guard.cpp): judge() calls the
//     pieces below per argument, and within_verified() last. The same guard
//     decides the torch.compile routing: compile.py
//     (runtime/autoload/forge_autoload) calls it in libforge.so through ctypes
//     and keeps no rule of its own (tests/runtime/package/test_guard_torch.cpp
//     checks that the routing and the ATen override agree).
//
// Dims count from 0: the guard takes no negative dim (the worker's sweep
// reads one from the end, so such an entry is verified but never matched).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace forge::family {

struct Vary {
  int arg = 0, dim = 0;
};
struct Pin {  // int argument `arg` equals the extent of vary entry `vary`
  int arg = 0, vary = 0;
};

struct SignatureFamily {
  std::vector<Vary> vary;
  std::vector<Pin> pins;
  bool contiguous = true;
  std::vector<int> vary_outputs;
};

// Reads the keys above from a JSON object (family.yaml's signature_family as
// JSON, or a package.json entry, which carries the same keys); absent keys
// take their defaults, a null or non-object gives the defaults. Throws the
// JSON library's exception when a present key is malformed (an entry without
// "arg", a non-integer).
template <class Json>
SignatureFamily parse(const Json& j) {
  SignatureFamily f;
  if (!j.is_object()) return f;
  if (j.contains("vary"))
    for (const auto& e : j["vary"]) f.vary.push_back({e.at("arg").template get<int>(), e.at("dim").template get<int>()});
  if (j.contains("pins"))
    for (const auto& e : j["pins"]) f.pins.push_back({e.at("arg").template get<int>(), e.at("vary").template get<int>()});
  if (j.contains("contiguous")) f.contiguous = j["contiguous"].template get<bool>();
  if (j.contains("vary_outputs")) f.vary_outputs = j["vary_outputs"].template get<std::vector<int>>();
  return f;
}

// The keys above as package.json carries them (every key, defaults included).
template <class Json>
Json to_json(const SignatureFamily& f) {
  Json vary = Json::array(), pins = Json::array();
  for (const auto& v : f.vary) vary.push_back({{"arg", v.arg}, {"dim", v.dim}});
  for (const auto& p : f.pins) pins.push_back({{"arg", p.arg}, {"vary", p.vary}});
  return {{"vary", vary}, {"pins", pins}, {"contiguous", f.contiguous}, {"vary_outputs", f.vary_outputs}};
}

// What is wrong with a parsed family ("" when nothing): a negative argument
// index, a pin naming no vary entry, a negative output index.
std::string problem(const SignatureFamily& f);

// ---- the guard, one argument at a time ------------------------------------
// `extent` holds one entry per vary entry, -1 until a call's tensor shows it.

// The index of vary entry {arg, dim}, -1 when that dim does not vary.
int vary_index(const SignatureFamily& f, int arg, int dim);

// Tensor argument `arg` of a call, of the captured rank: every dim equals the
// captured one or varies (its extent goes into `extent`).
bool shape_matches(const SignatureFamily& f, int arg, std::span<const int64_t> captured,
                   std::span<const int64_t> call, std::vector<int64_t>& extent);

// Its layout: contiguous for a contiguous family, else the captured strides
// at storage offset 0. `call_strides` is compared only in the second case.
bool layout_matches(const SignatureFamily& f, bool call_contiguous, std::span<const int64_t> call_strides,
                    std::span<const int64_t> captured_strides, int64_t storage_offset);

// Int argument `arg`: a pinned one equals the extent of its vary entry (seen
// by then: tensors come first in every op forge targets), any other its
// captured value.
bool int_matches(const SignatureFamily& f, int arg, int64_t value, int64_t captured,
                 const std::vector<int64_t>& extent);

// ---- the verified bound on the varied extents -----------------------------
// A package.json entry's `vary_max` is the accepted evaluation record's
// `verify.vary_max`: one integer per vary entry, in that order, the largest
// extent of that dim the worker verified (it verified every extent 1..64 and
// more below the largest). An entry packaged without one (a record from
// before the worker reported it) is trusted with the captured extent only.

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
// batch goes to stock. The guard's last test.
bool within_verified(const std::vector<VaryBound>& bounds, const std::vector<int64_t>& extent);

}  // namespace forge::family
