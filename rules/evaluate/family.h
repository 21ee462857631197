// The strategy library's op families: targets/<family>/family.yaml says which
// backend ops a family covers (`ops`), how its kernels are verified (`verify`,
// `tolerance`), what a call costs (`cost`) and which calls one kernel may be
// trusted with (`signature_family`). forge reads the file as JSON, the form the
// worker receives it in (docs/WORKER.md, "family").
//
// Errors throw forge::Error naming the file: "<path>:LINE:COL: <message>" when
// the place is known (YAML syntax, a bad value), else "<path>: <message>".
// Keys this validator does not know are kept and passed on (families grow:
// kernel templates, references); the ones it knows must be well-formed.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/target.h"

namespace forge {

struct Family {
  std::string name;              // the folder name, e.g. "softmax"; the op for a derived family
  std::filesystem::path path;    // .../targets/softmax/family.yaml; empty for a derived family
  std::string text;              // the YAML text (a derived family's is generated)
  bool derived = false;          // derive_family's: no family.yaml covers the op
  nlohmann::json spec;           // the whole file as JSON
  std::string digest;            // sha256 of the file's bytes (enters evaluation keys)
  std::vector<std::string> ops;  // backend ops it covers: "_softmax", "mean.dim"
};

// The built-in strategy library: <forge source>/targets.
std::filesystem::path default_targets_dir();

// Reads and validates one family file.
Family load_family(const std::filesystem::path& file);

// Every targets/*/family.yaml under `root`, sorted by name. Throws on the first
// invalid file, or when two families claim the same op (naming both files).
std::vector<Family> load_families(const std::filesystem::path& root);

// The family covering backend op `op` ("name" or "name.overload"): an exact
// entry in `ops` (overloads differ in schema, so each is listed on its own).
// nullopt if none.
std::optional<Family> find_family(const std::vector<Family>& families, const std::string& op);

// The family of a captured call when no family.yaml covers its op: the
// signature as captured (nothing varies; a non-contiguous input keeps its
// strides exactly), outputs as stock returns them, verified against stock on
// the captured samples and fresh inputs in two value ranges (NaN and +inf
// specials with a floating input; integer inputs keep the captured values'
// range, runtime/worker/cases.h), the worker's tolerances per dtype, cost the
// bytes the call moves. Its text is the family.yaml it stands for.
Family derive_family(const Target& t);

// The family a target is verified and packaged under: the family.yaml that
// covers its op, else the derived one. nullopt, with *why_not, when the
// candidate ABI cannot express the call (runtime/common/abi_args.h).
std::optional<Family> family_of(const std::vector<Family>& families, const Target& t,
                                std::string* why_not = nullptr);

}  // namespace forge
