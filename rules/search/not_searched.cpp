#include "rules/search/not_searched.h"

#include "rules/search/strategies.h"

namespace forge {

int no_family(Target& t, const std::string& why) {
  leave_out(t, Selection::Abi, why);
  return 0;
}

int no_proposer(Target& t, const Family& family, const ProposerSpec& proposer, const std::string& backend) {
  if (!proposer.strategies) {
    leave_out(t, Selection::NoProposer,
              "forge.yaml's proposer turns the strategy library off and configures no model (proposer.llm)");
    return 0;
  }
  if (family.derived) {
    leave_out(t, Selection::NoProposer,
              "the strategy library has no family for " + t.op +
                  " (its family is derived from the call: verifiable, nothing proposes); no model proposer "
                  "configured (proposer.llm)");
    return 0;
  }
  const std::string file = "targets/" + family.name + "/strategies.yaml";
  const std::vector<Strategy> all = load_strategies(family);
  const auto nearest = nearest_strategy(all, t, backend);
  std::string why;
  if (!nearest) {
    why = file + " has no strategy for the " + backend + " backend";
  } else {
    why = "no strategy applies at this shape; nearest: " + nearest->strategy->name + " in " + file + ", which needs ";
    for (size_t i = 0; i < nearest->unmet.size(); ++i) why += (i ? "; " : "") + nearest->unmet[i];
  }
  leave_out(t, Selection::NoProposer, why + "; no model proposer configured (proposer.llm)");
  return 0;
}

}  // namespace forge
