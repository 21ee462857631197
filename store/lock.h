// StoreLock: one forge at a time per store folder.
//
// An exclusive flock(2) on `<root>/lock`, held for the object's lifetime. The
// kernel drops it when the process exits or is killed, so a crashed forge never
// leaves a stale lock behind; the pid written into the file is only for the
// message a waiting forge prints. The file itself is never deleted (deleting a
// flock'ed file lets two processes lock two different inodes).
//
// The descriptor is close-on-exec, so spawned tools do not inherit the lock.
// flock locks belong to the open file, not the process: a second StoreLock on
// the same root in the same process waits like a second process would (so do
// not take it twice on one thread). On NFS, Linux maps flock to fcntl locks.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <functional>
#include <optional>
#include <string>

namespace forge::store {

class StoreLock {
 public:
  using WaitFn = std::function<void(const std::string&)>;

  // Takes the lock, creating `root` and the lock file when missing. When another
  // process holds it, calls on_wait once (if set) with a message like "waiting
  // for another forge (pid 1234) holding /x/.forge/lock", then blocks until it
  // is free. Throws forge::Error when the lock file cannot be opened or locked.
  StoreLock(const std::filesystem::path& root, const WaitFn& on_wait);
  // The lock if it is free right now, std::nullopt if someone holds it; throws
  // forge::Error like the constructor.
  static std::optional<StoreLock> try_lock(const std::filesystem::path& root);

  ~StoreLock();
  StoreLock(StoreLock&& other) noexcept;
  StoreLock& operator=(StoreLock&& other) noexcept;
  StoreLock(const StoreLock&) = delete;
  StoreLock& operator=(const StoreLock&) = delete;

  const std::filesystem::path& path() const { return m_path; }

  // The pid the current (or last) holder wrote into `<root>/lock`, 0 if none.
  static pid_t holder_pid(const std::filesystem::path& root);

 private:
  StoreLock(std::filesystem::path path, int fd);
  void release();

  std::filesystem::path m_path;
  int m_fd = -1;
};

}  // namespace forge::store
