// A race between a target's tip kernel and a challenger whose median beat the
// tip's (the improvement rule, rules/improvement.h): both are evaluated again
// by the worker in "race" mode (the first case checked, then the benchmark,
// every timed call checked), alternating tip, challenger, challenger, tip, ...
// so drift over the race falls on both alike; each evaluation gives one time
// ratio (kernel / stock, timed together), and decide_race() judges them.
//
// A race is a step (kind "race") keyed on both kernels' .so digests, the
// target, the family, the worker build, the device, the benchmark settings
// and the rule: a build that changes none of them reads the same decision.
//
// Record: {"tip": tip's evaluation digest, "challenger": its evaluation digest
//          (added to the cached step's record), "rule": {...}, "order": ["tip", "challenger", ...],
//          "tip_ratios": [...], "challenger_ratios": [...],
//          "challenger_wins", "effect", "p", "u", "why", "seconds"}
// A contender the worker rejects during the race loses it (its reason in "why").
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "engine/build.h"
#include "rules/evaluate/evaluate.h"
#include "rules/improvement.h"

namespace forge {

struct Contender {
  std::string evaluation;  // digest of its evaluation record
  nlohmann::json record;   // that record (its compile.so names the kernel)
};

// The race's record; nullopt when it could not be run (a kernel missing from
// the store, the worker failing, an interruption): then there is no decision.
std::optional<nlohmann::json> race_kernels(BuildContext& ctx, Executor& executor, const Target& target,
                                           const Family& family, const Contender& tip,
                                           const Contender& challenger, const RaceRule& rule,
                                           const EvalSettings& settings = {});

}  // namespace forge
