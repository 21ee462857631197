#include "rules/rules.h"

#include "rules/capture.h"
#include "rules/search.h"

namespace forge {

namespace {

// Placeholder for the stages that have not landed: says so in the report
// instead of pretending (the history and package issues replace it).
class PendingStages : public Rule {
 public:
  std::string name() const override { return "pending"; }
  void apply(BuildContext& ctx) override {
    if (!ctx.targets.empty())
      ctx.notes.push_back("history and packaging are not built yet: accepted kernels are in the "
                          "store only, and the model still runs the stock kernels");
  }
};

}  // namespace

std::vector<std::unique_ptr<Rule>> default_rules(bool capture_only) {
  std::vector<std::unique_ptr<Rule>> rules;
  rules.push_back(std::make_unique<CaptureRule>());
  if (!capture_only) {
    rules.push_back(std::make_unique<SearchRule>());
    rules.push_back(std::make_unique<PendingStages>());
  }
  return rules;
}

}  // namespace forge
