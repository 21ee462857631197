#include "arena.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace forge::worker {

void* Arena::allocate(int64_t bytes) {
  const int64_t align = 4096;
  const int64_t start = (m_used + align - 1) / align * align;
  if (bytes < 0 || start + bytes > m_capacity) return nullptr;
  m_used = start + bytes;
  if (m_used > m_peak) m_peak = m_used;
  ++m_live;
  return m_base + start;
}

void Arena::release() {
  if (m_live > 0 && --m_live == 0) m_used = 0;
}

int64_t Arena::offset_of(const void* p) const {
  auto c = static_cast<const char*>(p);
  if (!p || c < m_base || c > m_base + m_capacity) return -1;
  return c - m_base;
}

namespace {

class CpuArena final : public Arena {
 public:
  explicit CpuArena(int64_t capacity) {
    m_fd = ::memfd_create("forge-arena", MFD_CLOEXEC);
    if (m_fd < 0) throw std::runtime_error(std::string("memfd_create: ") + std::strerror(errno));
    if (::ftruncate(m_fd, capacity) != 0) throw std::runtime_error(std::string("ftruncate: ") + std::strerror(errno));
    void* p = ::mmap(nullptr, static_cast<size_t>(capacity), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, m_fd, 0);
    if (p == MAP_FAILED) throw std::runtime_error(std::string("mmap: ") + std::strerror(errno));
    m_base = static_cast<char*>(p);
    m_capacity = capacity;
  }
  ~CpuArena() override {
    ::munmap(m_base, static_cast<size_t>(m_capacity));
    ::close(m_fd);
  }
  bool cuda() const override { return false; }
  int fd() const override { return m_fd; }

 private:
  int m_fd = -1;
};

}  // namespace

std::unique_ptr<Arena> make_cpu_arena(int64_t capacity) { return std::make_unique<CpuArena>(capacity); }

}  // namespace forge::worker
