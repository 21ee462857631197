// What changed in a store since the last look, cheaply: `forge serve` calls
// poll() every 500 ms and turns the answer into server-sent events. A build in
// another process changes the store only by replacing files whole (temp +
// rename), so a file's (mtime, size, inode) pair changes with every write;
// nothing is read or hashed here.
//
// Watched: every journal ref (<store>/refs/journal/<target id>), the capture
// and package steps' explain refs (a new capture or package), and the history
// repository's ref file and packed-refs (a new accepted kernel).
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace forge::serve {

struct StoreChanges {
  std::vector<std::string> journals;  // target ids whose journal changed (or appeared)
  bool history = false;               // the history ref moved
  bool other = false;                 // a capture/package/other ref changed
  bool any() const { return !journals.empty() || history || other; }
};

class StoreWatch {
 public:
  // `git_dir`: the history repository's git folder ("" when none); `ref`:
  // "refs/heads/forge/kernels".
  StoreWatch(std::filesystem::path store_root, std::filesystem::path git_dir, std::string ref);

  // Differences since the previous poll (the first poll reports what exists).
  StoreChanges poll();

 private:
  struct Stamp {
    long long mtime_ns = 0;
    long long size = 0;
    unsigned long long inode = 0;
    bool operator==(const Stamp&) const = default;
  };
  using Stamps = std::map<std::string, Stamp>;
  void scan_dir(const std::filesystem::path& dir, const std::string& prefix, Stamps& out) const;
  void stamp_file(const std::filesystem::path& file, const std::string& name, Stamps& out) const;

  std::filesystem::path m_root, m_git_dir;
  std::string m_ref;
  Stamps m_last;
};

}  // namespace forge::serve
