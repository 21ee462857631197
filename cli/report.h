// Human-readable output of builds and status (the --json shapes are built in
// engine/build.cpp; these tables print the same fields).
#pragma once

#include <nlohmann/json.hpp>

namespace forge::cli {

// `report` is run_build()'s JSON.
void print_build_report(const nlohmann::json& report);
void print_targets_table(const nlohmann::json& targets);

}  // namespace forge::cli
