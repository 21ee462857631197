#include "store/lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <utility>

#include "util/error.h"

namespace forge::store {
namespace fs = std::filesystem;
namespace {

fs::path lock_path(const fs::path& root) {
  return root / "lock";
}

[[noreturn]] void fail(const std::string& what, const fs::path& path) {
  throw Error("cannot " + what + " " + path.string() + ": " + std::strerror(errno));
}

int open_lock_file(const fs::path& path) {
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) fail("open lock file", path);
  return fd;
}

// flock, retried on EINTR. Returns false only for EWOULDBLOCK (with LOCK_NB).
bool lock_fd(int fd, int op, const fs::path& path) {
  while (::flock(fd, op) != 0) {
    if (errno == EINTR) continue;
    if (errno == EWOULDBLOCK) return false;
    int saved = errno;
    ::close(fd);
    errno = saved;
    fail("lock", path);
  }
  return true;
}

// Best effort: the pid is for messages only, the lock holds without it.
void record_pid(int fd) {
  std::string text = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) == 0) (void)!::pwrite(fd, text.data(), text.size(), 0);
}

}  // namespace

StoreLock::StoreLock(fs::path path, int fd) : m_path(std::move(path)), m_fd(fd) {
  record_pid(m_fd);
}

StoreLock::StoreLock(const fs::path& root, const WaitFn& on_wait) : m_path(lock_path(root)) {
  m_fd = open_lock_file(m_path);
  if (!lock_fd(m_fd, LOCK_EX | LOCK_NB, m_path)) {
    if (on_wait) {
      pid_t holder = holder_pid(root);
      std::string who = holder > 0 ? " (pid " + std::to_string(holder) + ")" : "";
      on_wait("waiting for another forge" + who + " holding " + m_path.string());
    }
    lock_fd(m_fd, LOCK_EX, m_path);
  }
  record_pid(m_fd);
}

std::optional<StoreLock> StoreLock::try_lock(const fs::path& root) {
  fs::path path = lock_path(root);
  int fd = open_lock_file(path);
  if (!lock_fd(fd, LOCK_EX | LOCK_NB, path)) {
    ::close(fd);
    return std::nullopt;
  }
  return StoreLock(std::move(path), fd);
}

StoreLock::~StoreLock() {
  release();
}

StoreLock::StoreLock(StoreLock&& other) noexcept
    : m_path(std::move(other.m_path)), m_fd(std::exchange(other.m_fd, -1)) {}

StoreLock& StoreLock::operator=(StoreLock&& other) noexcept {
  if (this != &other) {
    release();
    m_path = std::move(other.m_path);
    m_fd = std::exchange(other.m_fd, -1);
  }
  return *this;
}

void StoreLock::release() {
  if (m_fd < 0) return;
  (void)!::ftruncate(m_fd, 0);  // no stale pid for the next waiter's message
  ::close(m_fd);                // closing the last descriptor drops the flock
  m_fd = -1;
}

pid_t StoreLock::holder_pid(const fs::path& root) {
  char buf[32] = {};
  int fd = ::open(lock_path(root).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  long pid = 0;
  if (n <= 0 || std::from_chars(buf, buf + n, pid).ec != std::errc()) return 0;
  return static_cast<pid_t>(pid);
}

}  // namespace forge::store
