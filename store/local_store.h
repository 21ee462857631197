// LocalStore: the Store in a folder (default `.forge/`). On-disk format:
//
//   <root>/VERSION                 "forge store format 1\n"
//   <root>/lock                    flock(2) target and holder's pid (store/lock.h)
//   <root>/objects/ab/<62 hex>     object whose sha256 is "ab<62 hex>"
//   <root>/actions/ab/<62 hex>     action record under step key "ab<62 hex>"
//   <root>/refs/<name>             ref; a name with '/' makes subfolders
//
// Every object, action and ref file is
//   magic    8 bytes   "FORGEOB1" object, "FORGEAC1" action, "FORGERF1" ref
//   version  u32 LE    kFormatVersion (store/entry_format.h), currently 1
//   length   u64 LE    payload bytes
//   payload  length bytes
//   trailer  64 bytes  actions and refs only: lower-case hex sha256(payload)
// Why so: the magic says which map a file belongs to and that it is ours; the
// version lets a future forge reject (and recompute) what it cannot read; the
// length catches truncation and appended bytes; objects need no trailer since
// their name is the sha256 of their payload, which a read re-checks; actions and
// refs are named by what they mean, not what they hold, so they carry one.
// Two-hex-char fan-out folders keep any one folder small.
// NEVER change any of this without bumping kFormatVersion.
//
// Files are only ever replaced whole (AtomicFile: temp + fsync + rename); a
// killed writer leaves at most a "*.tmp.<pid>.<n>" file, swept by recover().
// A file that fails any check is a miss: it is reported through warn (naming
// it), and removed so the next build recomputes it. A folder that cannot be
// written makes every put a warning (the first few are reported), never a throw.
// Safe for concurrent readers and writers, threads or processes: same-named
// writers write the same bytes (objects) or last-rename-wins (actions, refs).
// A ref "a" and a ref "a/b" cannot both exist (the second put warns).
#pragma once

#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "store/entry_format.h"
#include "store/store.h"

namespace forge::store {

class LocalStore final : public Store {
 public:
  // Creates root, its folders and VERSION when missing, then recover()s. Never
  // throws; a folder it cannot create is a warning. A null `warn` prints to
  // stderr. `warn` may be called from any thread that uses the store.
  LocalStore(std::filesystem::path root, WarnFn warn);

  std::string put_object(std::string_view bytes) override;
  std::optional<std::string> get_object(const std::string& digest) override;
  // Cheap: checks the header and the file's size, not the content hash, so a
  // later get_object can still miss (callers must handle that anyway).
  bool has_object(const std::string& digest) override;

  void put_action(const std::string& key, std::string_view record) override;
  std::optional<std::string> get_action(const std::string& key) override;

  void put_ref(const std::string& name, std::string_view value) override;
  std::optional<std::string> get_ref(const std::string& name) override;

  // Removes temp files of dead writers (store/temp_sweep.h); returns how many.
  int recover();

  const std::filesystem::path& root() const { return m_root; }
  std::filesystem::path object_path(const std::string& digest) const;
  std::filesystem::path action_path(const std::string& key) const;
  std::filesystem::path ref_path(const std::string& name) const;

 private:
  // The payload of the entry at `path`; `digest` non-empty for objects.
  std::optional<std::string> read_entry(EntryKind kind, const std::filesystem::path& path,
                                        const std::string& digest);
  void write_entry(EntryKind kind, const std::filesystem::path& path, std::string_view payload);
  // Warns about, then removes, the bad file at `path` if it is still the file
  // `seen` describes (a concurrent writer may have replaced it meanwhile).
  void discard(const std::filesystem::path& path, const struct stat& seen, const std::string& why);
  void write_failed(const std::string& message);
  void check_version_file();

  std::filesystem::path m_root;
  WarnFn m_warn;
  std::atomic<int> m_write_failures{0};
};

}  // namespace forge::store
