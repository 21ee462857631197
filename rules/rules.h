// The stages of `forge build`, in order. Each is a Rule (engine/build.h).
#pragma once

#include <memory>
#include <vector>

#include "engine/build.h"

namespace forge {

// capture_only: stop after capture (`forge capture`).
std::vector<std::unique_ptr<Rule>> default_rules(bool capture_only);

}  // namespace forge
