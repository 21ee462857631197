#include "rules/rules.h"

#include "rules/capture/capture.h"
#include "rules/evaluate/compile_baseline.h"
#include "rules/history/history.h"
#include "rules/package/package.h"
#include "rules/search/search.h"

namespace forge {

std::vector<std::unique_ptr<Rule>> default_rules(bool capture_only) {
  std::vector<std::unique_ptr<Rule>> rules;
  rules.push_back(std::make_unique<CaptureRule>());
  if (!capture_only) {
    rules.push_back(std::make_unique<SearchRule>());
    rules.push_back(std::make_unique<CompileBaselineRule>());
    rules.push_back(std::make_unique<HistoryRule>());
    rules.push_back(std::make_unique<PackageRule>());
  }
  return rules;
}

}  // namespace forge
