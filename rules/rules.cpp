#include "rules/rules.h"

#include "rules/capture.h"
#include "rules/history.h"
#include "rules/search.h"

namespace forge {

namespace {

// Placeholder for the stage that has not landed: says so in the report
// instead of pretending (the package issue replaces it).
class PendingStages : public Rule {
 public:
  std::string name() const override { return "pending"; }
  void apply(BuildContext& ctx) override {
    if (!ctx.targets.empty())
      ctx.notes.push_back("packaging is not built yet: accepted kernels are committed to git "
                          "history only, and the model still runs the stock kernels");
  }
};

}  // namespace

std::vector<std::unique_ptr<Rule>> default_rules(bool capture_only) {
  std::vector<std::unique_ptr<Rule>> rules;
  rules.push_back(std::make_unique<CaptureRule>());
  if (!capture_only) {
    rules.push_back(std::make_unique<SearchRule>());
    rules.push_back(std::make_unique<HistoryRule>());
    rules.push_back(std::make_unique<PendingStages>());
  }
  return rules;
}

}  // namespace forge
