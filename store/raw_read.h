// Reading a store file with plain POSIX calls, keeping its identity (the
// fstat of the descriptor actually read) so a corrupt file can later be
// removed only if it is still that same file.
#pragma once

#include <sys/stat.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

namespace forge::store {

struct RawRead {
  enum Status {
    kOk,       // bytes holds the first min(max_bytes, size) bytes; st is valid
    kMissing,  // no such file (or a parent is not a folder): a plain miss
    kError,    // could not read: error says why; not evidence of corruption
  };
  Status status = kMissing;
  std::string bytes;
  struct stat st {};
  std::string error;
};

// Reads at most `max_bytes` from the start of the regular file at `path`.
RawRead read_raw(const std::filesystem::path& path, size_t max_bytes = SIZE_MAX);

// True when `path` still names the file `seen` describes (same device and inode).
bool same_file(const std::filesystem::path& path, const struct stat& seen);

}  // namespace forge::store
