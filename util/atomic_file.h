// All writes go through AtomicFile: bytes go to a temp file in the target's
// folder; commit() fsyncs and renames it over the target, so a reader sees the
// old file or the new one, never a torn one. The destructor removes an
// uncommitted temp file (an interrupted write leaves nothing behind but, at
// worst, a stray ".tmp." file that Store::recover() sweeps).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace forge {

class AtomicFile {
 public:
  explicit AtomicFile(std::filesystem::path target);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(std::string_view bytes);
  // Throws forge::Error on failure; the target is then unchanged.
  void commit();

  const std::filesystem::path& temp_path() const { return m_temp; }

 private:
  std::filesystem::path m_target;
  std::filesystem::path m_temp;
  int m_fd = -1;
  bool m_committed = false;
};

// Convenience: atomically replace `path` with `bytes`, creating parent folders.
void write_file_atomic(const std::filesystem::path& path, std::string_view bytes);

// Whole file, or std::nullopt-like empty result with ok=false when unreadable.
bool read_file(const std::filesystem::path& path, std::string* out);

}  // namespace forge
