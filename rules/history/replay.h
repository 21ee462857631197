// Replaying history (docs/HISTORY.md, "Replaying"): what `forge replay` and
// `forge bisect` read from the history branch, and their pure parts.
//
//   kernels_at        the kernels a revision's tree holds: kernels/<target>/<file>
//                     and its result.json
//   commits_changing  the ref's first-parent commits, oldest first, that changed
//                     one target's kernels/<target>/ folder
//   timing_changed    the "changed" rule: medians apart by more than both spreads
//   first_true        git-bisect's binary search over a monotone predicate
//   rejected_on_case  whether an evaluation record failed on a named case
//
// Re-evaluating a kernel goes through rules/evaluate/evaluate.h (cli/cmd_replay.cpp).
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "rules/improvement.h"
#include "rules/history/repo.h"

namespace forge {

struct HistoryKernel {
  std::string target;     // "<model>/<op>/<sig6>", the folder under kernels/
  std::string file;       // the kernel file in that folder (not result.json)
  std::string source;     // its text
  nlohmann::json result;  // result.json; null when absent or not JSON
};

// The commit `rev` names (anything git_revparse_single resolves): full sha,
// subject and message fields. Throws Error for an unknown revision.
HistoryCommit resolve_commit(const std::filesystem::path& repo, const std::string& rev);

// Every kernel in `rev`'s tree, by target id. A target folder with no kernel
// file is left out; one with several takes the first by name.
std::vector<HistoryKernel> kernels_at(const std::filesystem::path& repo, const std::string& rev);

// The kernel of `target` (an exact id) in `rev`'s tree, nullopt when absent.
std::optional<HistoryKernel> kernel_at(const std::filesystem::path& repo, const std::string& rev,
                                       const std::string& target);

// The first-parent commits of `ref`, oldest first, whose kernels/<target>/
// tree differs from their first parent's (a root commit: when it has one).
// Empty when the ref does not exist.
std::vector<HistoryCommit> commits_changing(const std::filesystem::path& repo,
                                            const std::string& ref, const std::string& target);

// True when the medians differ by more than the two spreads together.
bool timing_changed(const BenchTime& recorded, const BenchTime& now);

// The first index in [0, n) where `pred` holds, assuming it is false then true
// (monotone, like git bisect); n when it holds nowhere. Tests O(log n) indices.
size_t first_true(size_t n, const std::function<bool(size_t)>& pred);

// Whether evaluation record `rec` (rules/evaluate/evaluate.h) is a rejection on the
// verification case named `name` ("sample 0", "fresh seed=2 range=[-1,1]",
// "edge input.size(0)=17"): the worker stops at the first failing case and
// names it in the detail ("... on case sample 0: got ...").
bool rejected_on_case(const nlohmann::json& rec, const std::string& name);

}  // namespace forge
