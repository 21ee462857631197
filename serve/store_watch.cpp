#include "serve/store_watch.h"

#include <sys/stat.h>

namespace forge::serve {
namespace fs = std::filesystem;

StoreWatch::StoreWatch(fs::path store_root, fs::path git_dir, std::string ref)
    : m_root(std::move(store_root)), m_git_dir(std::move(git_dir)), m_ref(std::move(ref)) {}

void StoreWatch::stamp_file(const fs::path& file, const std::string& name, Stamps& out) const {
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return;
  out[name] = {static_cast<long long>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec,
               static_cast<long long>(st.st_size), static_cast<unsigned long long>(st.st_ino)};
}

void StoreWatch::scan_dir(const fs::path& dir, const std::string& prefix, Stamps& out) const {
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const std::string rel = it->path().lexically_relative(dir).generic_string();
    if (rel.find(".tmp.") != std::string::npos) continue;  // a writer's temp file
    stamp_file(it->path(), prefix + rel, out);
  }
}

StoreChanges StoreWatch::poll() {
  Stamps now;
  scan_dir(m_root / "refs" / "journal", "journal/", now);
  scan_dir(m_root / "refs" / "explain", "explain/", now);
  if (!m_git_dir.empty()) {
    stamp_file(m_git_dir / m_ref, "git/ref", now);
    stamp_file(m_git_dir / "packed-refs", "git/packed-refs", now);
  }
  StoreChanges changes;
  auto note = [&](const std::string& name) {
    if (name.rfind("journal/", 0) == 0)
      changes.journals.push_back(name.substr(8));
    else if (name.rfind("git/", 0) == 0)
      changes.history = true;
    else
      changes.other = true;
  };
  for (const auto& [name, stamp] : now) {
    auto it = m_last.find(name);
    if (it == m_last.end() || !(it->second == stamp)) note(name);
  }
  for (const auto& [name, stamp] : m_last)
    if (!now.count(name)) note(name);
  m_last = std::move(now);
  return changes;
}

}  // namespace forge::serve
