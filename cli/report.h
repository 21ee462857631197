// Human-readable output of builds and status (the --json shapes are built in
// engine/build.cpp; these tables print the same fields).
#pragma once

#include <nlohmann/json.hpp>

namespace forge::cli {

// `report` is run_build()'s JSON.
void print_build_report(const nlohmann::json& report);
// The selected targets; those the search did not take say why.
void print_targets_table(const nlohmann::json& targets);
// `forge status --all`: the report's not_selected list, each op with its reason and why.
void print_not_selected(const nlohmann::json& ops);
// The chains of ops found in the capture's data flow (rules/capture/chains.h):
// a line each with their ops, share and why they are not searched.
void print_chains(const nlohmann::json& chains);
// One line per model: how many captured signatures were not selected, by reason.
void print_not_selected_summary(const nlohmann::json& models);

}  // namespace forge::cli
