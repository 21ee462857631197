// Package, the end-to-end verdict: per model the package can touch, its
// command once with every forged call re-run by stock and compared, then
// alternating timed runs without and with the library (a cached step keyed by
// the package's digest); "slower" is judged from the compared runs each build
// (ran_slower, package.h). The assembly it judges is assembly.h.
#pragma once

#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/build.h"
#include "rules/package/assembly.h"

namespace forge {

struct Verdicts {
  nlohmann::json checks = nlohmann::json::object();  // checks.json: per model, ok or why not
  std::set<std::string> slower;  // checked models found slower, left-out ones included
  // Models with compile_env whose compiled run was slower with forge's routes
  // into compiled graphs than without (the library loaded in both runs), or
  // failed with them (its record's reason says how).
  std::set<std::string> compile_slower;
  bool failed = false;           // a check failed (ctx.failed too, with a note)
};

// Checks every model with a forged target in `assembly`, and the left-out
// ones (other models' kernels may override the same ops); the records go to
// ctx.package["models"]. A model with compile_env and a target routed into
// compiled graphs also gets a check of its compiled run, routes off against
// on, in the record's "compiled".
Verdicts check_package(BuildContext& ctx, const Assembly& assembly, const std::set<std::string>& left_out);

// "stock -> forged, speedup" of a check record, for notes.
std::string slower_figures(const nlohmann::json& record);

}  // namespace forge
