// Why the search leaves a selected target alone: search_target's early
// returns record it on the target (Target::selection, why) through these, so
// `forge status`, the build's report and the GUI say it. Each returns 0, the
// count of targets searched, for `return no_family(t);`.
#pragma once

#include <string>

#include "engine/manifest.h"
#include "engine/target.h"
#include "rules/evaluate/family.h"

namespace forge {

// No family for t (rules/evaluate/family.h, family_of: the candidate ABI
// cannot express the call; `why` names the argument). The one place this
// reason is recorded.
int no_family(Target& t, const std::string& why);

// Neither the strategy library nor a model proposes for `t` in `family` on
// `backend`: the library is off and no model is configured, or no strategy
// applies at this shape (naming the nearest strategy and what it needs).
int no_proposer(Target& t, const Family& family, const ProposerSpec& proposer, const std::string& backend);

}  // namespace forge
