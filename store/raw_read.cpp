#include "store/raw_read.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

namespace forge::store {

namespace {

struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

RawRead read_raw(const std::filesystem::path& path, size_t max_bytes) {
  RawRead r;
  Fd file{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (file.fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return r;
    r.status = RawRead::kError;
    r.error = std::strerror(errno);
    return r;
  }
  if (::fstat(file.fd, &r.st) != 0) {
    r.status = RawRead::kError;
    r.error = std::strerror(errno);
    return r;
  }
  if (!S_ISREG(r.st.st_mode)) {
    r.status = RawRead::kError;
    r.error = "not a regular file";
    return r;
  }
  size_t want = std::min<uint64_t>(max_bytes, static_cast<uint64_t>(r.st.st_size));
  r.bytes.resize(want);
  size_t got = 0;
  while (got < want) {
    ssize_t n = ::read(file.fd, r.bytes.data() + got, want - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      r.status = RawRead::kError;
      r.error = std::strerror(errno);
      r.bytes.clear();
      return r;
    }
    if (n == 0) break;  // shrank while we read: the size check will catch it
    got += static_cast<size_t>(n);
  }
  r.bytes.resize(got);
  r.status = RawRead::kOk;
  return r;
}

bool same_file(const std::filesystem::path& path, const struct stat& seen) {
  struct stat now {};
  return ::stat(path.c_str(), &now) == 0 && now.st_dev == seen.st_dev && now.st_ino == seen.st_ino;
}

}  // namespace forge::store
