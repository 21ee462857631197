// The history branch: accepted kernels as git commits on a ref of their own
// (default refs/heads/forge/kernels), written straight into the object
// database, so the user's working tree, index and HEAD are never touched.
//
// Every commit's tree is the whole current set, one folder per target holding
// that target's best kernel so far (docs/HISTORY.md):
//   kernels/<model>/<op>/<sig6>/<kernel file>
//   kernels/<model>/<op>/<sig6>/result.json
// One commit per improvement. The message is a subject line, a blank line and
// "key: value" lines; `target:` and `source:` (sha256 of the kernel text) name
// the improvement, so committing the same entries again adds nothing and a
// rebuild appends only what the branch does not have yet. Contents are
// deterministic (no timestamps); commit times are now, or SOURCE_DATE_EPOCH.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/manifest.h"

namespace forge {

struct HistoryEntry {
  std::string target;     // "<model>/<op>/<sig6>"
  std::string file;       // kernel file name in the target's folder
  std::string source;     // kernel source text
  nlohmann::json result;  // becomes result.json
  std::string summary;    // the subject after the target id: "1.84x over eager (rows_3pass {})"
  // Body lines, "key: value", between the target: and source: lines.
  std::vector<std::pair<std::string, std::string>> fields;
};

// Who commits. Unset: git config's user (git_signature_default), else
// "forge <forge@localhost>"; time: SOURCE_DATE_EPOCH when set, else now.
struct GitAuthor {
  std::string name, email;
  std::optional<int64_t> time;  // seconds since the epoch, UTC
};

struct HistoryResult {
  std::filesystem::path repo;  // the repository's git folder
  std::string ref;
  int commits_added = 0;
  std::string tip;  // the ref's commit afterwards, "" when it does not exist
};

// The repository history goes to: history.repo when set, else the one holding
// forge.yaml (searched upward), else <store>/history.git (a bare repository,
// created only when `create`; without it an absent one is returned as "").
// The upward search stops at filesystem boundaries, as git's does.
std::filesystem::path locate_history_repo(const Manifest& m, bool create);

// Appends one commit per entry the branch lacks, in the given order, each
// replacing its target's folder in the tip's tree. `repo` is a repository (or a
// folder in one's working tree); a path that does not exist yet becomes a bare
// repository. Refuses (Error) when `ref` is the checked-out branch.
HistoryResult commit_history(const std::filesystem::path& repo, const std::string& ref,
                             const std::vector<HistoryEntry>& entries,
                             const std::optional<GitAuthor>& author = std::nullopt);

struct HistoryCommit {
  std::string commit;  // full sha
  std::string subject;
  std::map<std::string, std::string> fields;  // the message's "key: value" lines
};

// The ref's commits, newest first, following first parents; empty when the ref
// does not exist.
std::vector<HistoryCommit> read_history(const std::filesystem::path& repo, const std::string& ref);

// A unified diff of the kernels/ trees of two revisions (anything
// git_revparse_single resolves: "forge/kernels~1", a short sha).
std::string diff_history(const std::filesystem::path& repo, const std::string& from,
                         const std::string& to);

}  // namespace forge
