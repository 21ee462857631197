// Package, the end-to-end verdict: per model the package can touch, its
// command once with every forged call re-run by stock and compared, then
// alternating timed runs without and with the library (a cached step keyed by
// the package's digest); "slower" is judged from the compared runs each build
// (ran_slower, package.h). The assembly it judges is assembly.h.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/build.h"
#include "rules/package/assembly.h"

namespace forge {

struct Verdicts {
  nlohmann::json checks = nlohmann::json::object();  // checks.json: per model, ok or why not
  std::set<std::string> slower;  // checked models with kernels of their own found slower
  // Checked models with no kernel of their own in the package (left out, or
  // reached only through other models' kernels) found slower.
  std::set<std::string> slower_by_others;
  // Models with compile_env whose compiled run was slower with forge's routes
  // into compiled graphs than without (the library loaded in both runs), or
  // failed with them (its record's reason says how), each with the routed
  // targets that reach it: the routes that go.
  std::map<std::string, std::set<std::string>> compile_slower;
  bool failed = false;           // a check failed (ctx.failed too, with a note)
};

// Checks every model a kernel of `assembly` can reach (reaching_targets) and
// the left-out ones; the records go to ctx.package["models"]. A model with
// compile_env that a routed target reaches also gets a check of its compiled
// run, routes off against on, in the record's "compiled".
Verdicts check_package(BuildContext& ctx, const Assembly& assembly, const std::set<std::string>& left_out);

// The packaged targets whose kernels can run in `model`: its own, and other
// models' whose op (a chain's signature) its capture recorded too: overrides
// and routes match a call by its arguments, whichever model the target came from.
std::vector<const Target*> reaching_targets(const BuildContext& ctx, const Assembly& assembly,
                                            const std::string& model);

// The routes a compiled check (a record's "compiled") turns off among `routed`,
// those reaching the model: with per-route trials (more than one route, slower
// together), the ones that failed or were slower alone; else, or if none was,
// all of them.
std::set<std::string> routes_to_turn_off(const nlohmann::json& compiled, const std::set<std::string>& routed);

// "stock -> forged, speedup" of a check record, for notes.
std::string slower_figures(const nlohmann::json& record);

}  // namespace forge
