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

namespace forge {

// Evaluates one candidate source (rules/evaluate/evaluate.h) and turns its record into
// an outcome whose steps name the source and the record as store objects
// ("file", "source", "evaluation"). *record gets the record. Throws when the
// candidate could not be evaluated at all (verdict "error": the build stops).
mcts::Outcome judge_candidate(BuildContext& ctx, Executor& executor, const Target& target,
                              const Family& family, const CandidateSource& source,
                              nlohmann::json* record = nullptr);

}  // namespace forge
