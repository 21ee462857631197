// Judging a candidate for the search tree: one evaluation
// (rules/evaluate/evaluate.h) turned into an MCTS outcome (engine/mcts.h). The
// strategy library's actions (rules/search/) and the model's
// (rules/llm/proposer.h) are judged alike.
#pragma once

#include <nlohmann/json.hpp>

#include "engine/build.h"
#include "engine/mcts.h"
#include "rules/evaluate/compile.h"
#include "rules/evaluate/executor.h"
#include "rules/evaluate/family.h"

#include <stdexcept>

namespace forge {

// The worker refused the call before running anything: verifying it needs more
// memory than the device has free (reason "too_large"). The target is left
// out, not failed: no candidate could be evaluated for it on this device.
struct TooLargeToVerify : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Evaluates one candidate source (rules/evaluate/evaluate.h) and turns its record into
// an outcome whose steps name the source and the record as store objects
// ("file", "source", "evaluation"). *record gets the record. Throws when the
// candidate could not be evaluated at all (verdict "error": the build stops),
// TooLargeToVerify where the call is too large for the device.
mcts::Outcome judge_candidate(BuildContext& ctx, Executor& executor, const Target& target,
                              const Family& family, const CandidateSource& source,
                              nlohmann::json* record = nullptr);

}  // namespace forge
