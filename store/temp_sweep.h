// Removes temp files that killed writers left in a store folder.
//
// AtomicFile writes "<target>.tmp.<pid>.<n>" and renames it over the target; a
// writer killed before the rename leaves the temp behind. Readers never look at
// temp names, so a stray one is only wasted space; this sweep reclaims it.
//
// A temp file is stale when
//  - the pid in its name is not a live process on this machine (kill(pid, 0)
//    says ESRCH) and it is not ours, or
//  - it was last modified more than `max_age` ago, whoever wrote it (covers a
//    reused pid, and a store shared between machines, where pids mean nothing;
//    no single write of a build step takes an hour).
// A live writer whose temp is swept anyway only fails its commit, which the
// store reports as a warning; nothing wrong is ever read.
#pragma once

#include <chrono>
#include <filesystem>

#include "store/store.h"

namespace forge::store {

inline constexpr std::chrono::seconds kStaleTempAge{3600};

// Sweeps objects/, actions/ and refs/ under `root` (recursively) and temp files
// of root-level files (VERSION). Returns how many files were removed. Never
// throws; a file that cannot be removed is reported through `warn`.
int sweep_stale_temps(const std::filesystem::path& root, const WarnFn& warn,
                      std::chrono::seconds max_age = kStaleTempAge);

// True when `file_name` looks like an AtomicFile temp ("x.tmp.<pid>.<n>").
bool is_temp_name(const std::string& file_name);

}  // namespace forge::store
