#include "store/temp_sweep.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>

namespace forge::store {
namespace fs = std::filesystem;
namespace {

constexpr std::string_view kTempMarker = ".tmp.";

// The pid in "x.tmp.<pid>.<n>", or -1 when the name has none.
pid_t pid_of_temp(const std::string& file_name) {
  size_t at = file_name.rfind(kTempMarker);
  if (at == std::string::npos) return -1;
  const char* begin = file_name.data() + at + kTempMarker.size();
  const char* end = file_name.data() + file_name.size();
  long pid = -1;
  auto [next, ec] = std::from_chars(begin, end, pid);
  if (ec != std::errc() || next == begin || next == end || *next != '.' || pid <= 0) return -1;
  return static_cast<pid_t>(pid);
}

bool process_is_gone(pid_t pid) {
  if (pid <= 0 || pid == ::getpid()) return false;
  return ::kill(pid, 0) != 0 && errno == ESRCH;
}

bool is_stale(const fs::path& path, std::chrono::seconds max_age) {
  if (process_is_gone(pid_of_temp(path.filename().string()))) return true;
  std::error_code ec;
  auto mtime = fs::last_write_time(path, ec);
  if (ec) return false;
  return fs::file_time_type::clock::now() - mtime > max_age;
}

// Removes `path` when it is a stale temp; returns 1 when removed.
int sweep_one(const fs::path& path, const WarnFn& warn, std::chrono::seconds max_age) {
  if (!is_temp_name(path.filename().string()) || !is_stale(path, max_age)) return 0;
  std::error_code ec;
  if (fs::remove(path, ec)) return 1;
  if (ec && warn)
    warn("store: cannot remove stale temp file " + path.string() + ": " + ec.message());
  return 0;
}

}  // namespace

bool is_temp_name(const std::string& file_name) {
  return file_name.find(kTempMarker) != std::string::npos;
}

int sweep_stale_temps(const fs::path& root, const WarnFn& warn, std::chrono::seconds max_age) {
  int removed = 0;
  std::error_code ec;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_regular_file(ec)) removed += sweep_one(it->path(), warn, max_age);

  for (const char* sub : {"objects", "actions", "refs"}) {
    ec.clear();
    fs::recursive_directory_iterator it(root / sub, fs::directory_options::skip_permission_denied,
                                        ec);
    for (fs::recursive_directory_iterator end; !ec && it != end; it.increment(ec))
      if (it->is_regular_file(ec)) removed += sweep_one(it->path(), warn, max_age);
  }
  return removed;
}

}  // namespace forge::store
