// The exchange arena: the only memory the judge and the candidate's runner
// share (docs/WORKER.md, the threat model). Every buffer a candidate may see
// (inputs, outputs, workspace and their guards) is carved from it; references,
// snapshots and everything else of the judge live in the judge's own memory.
// CPU: a memory file both processes map; CUDA: one cudaMalloc exported by an
// IPC handle, never a caching-allocator segment. Torch-free.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

namespace forge::worker {

class Arena {
 public:
  virtual ~Arena() = default;
  char* base() const { return m_base; }
  int64_t capacity() const { return m_capacity; }
  virtual bool cuda() const = 0;
  virtual int fd() const { return -1; }                         // CPU: sent to the runner
  virtual const void* ipc_handle() const { return nullptr; }    // CUDA: sent to the runner
  virtual int64_t ipc_bytes() const { return 0; }

  // Bump allocation, 4 KiB aligned; nullptr when the arena is full. Memory is
  // reused once every allocation has been released.
  void* allocate(int64_t bytes);
  void release();
  int64_t used() const { return m_used; }
  int64_t peak() const { return m_peak; }  // the most ever in use at once
  // Bytes from base, or -1 when p is outside the arena.
  int64_t offset_of(const void* p) const;

 protected:
  char* m_base = nullptr;
  int64_t m_capacity = 0;

 private:
  int64_t m_used = 0;
  int64_t m_peak = 0;
  int64_t m_live = 0;
};

// The device could not give the arena its capacity (the evaluation is
// planned again with less).
struct ArenaAllocationFailed : std::runtime_error {
  explicit ArenaAllocationFailed(const std::string& what) : std::runtime_error(what) {}
};

// A sparse memory file of `capacity` bytes (pages exist once written).
std::unique_ptr<Arena> make_cpu_arena(int64_t capacity);
#if defined(FORGE_WORKER_CUDA)
// Defined in device_cuda.cpp.
std::unique_ptr<Arena> make_cuda_arena(int64_t capacity, int device);
#endif

}  // namespace forge::worker
