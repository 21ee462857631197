#include "util/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "util/error.h"

namespace forge {
namespace fs = std::filesystem;

namespace {
std::string unique_suffix() {
  static std::atomic<unsigned> counter{0};
  return std::to_string(::getpid()) + "." + std::to_string(counter++);
}
}  // namespace

AtomicFile::AtomicFile(fs::path target) : m_target(std::move(target)) {
  std::error_code ec;
  if (m_target.has_parent_path()) fs::create_directories(m_target.parent_path(), ec);
  m_temp = m_target;
  m_temp += ".tmp." + unique_suffix();
  m_fd = ::open(m_temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (m_fd < 0)
    throw Error("cannot create " + m_temp.string() + ": " + std::strerror(errno));
}

AtomicFile::~AtomicFile() {
  if (m_fd >= 0) ::close(m_fd);
  if (!m_committed) {
    std::error_code ec;
    fs::remove(m_temp, ec);
  }
}

void AtomicFile::write(std::string_view bytes) {
  const char* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t n = ::write(m_fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error("cannot write " + m_temp.string() + ": " + std::strerror(errno));
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
}

void AtomicFile::commit() {
  if (::fsync(m_fd) != 0)
    throw Error("cannot sync " + m_temp.string() + ": " + std::strerror(errno));
  ::close(m_fd);
  m_fd = -1;
  if (::rename(m_temp.c_str(), m_target.c_str()) != 0)
    throw Error("cannot rename " + m_temp.string() + " to " + m_target.string() + ": " +
                std::strerror(errno));
  m_committed = true;
}

void write_file_atomic(const fs::path& path, std::string_view bytes) {
  AtomicFile file(path);
  file.write(bytes);
  file.commit();
}

bool read_file(const fs::path& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return false;
  *out = std::move(ss).str();
  return true;
}

}  // namespace forge
