// The CUDA device: event timing on the evaluation stream, an L2 flush by a
// memset of a buffer at least twice the L2 (256 MiB at least), sticky-error
// detection, the CUDA-graph capture check and the device-to-device copy
// ceiling. Only the CUDA runtime API: no torch headers, compiled by the host
// compiler.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "device.h"

namespace forge::worker {
namespace {

std::string err_text(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
}

// Aborts the worker on an error in our own calls: forge sees it die with the
// message on stderr and starts a new one (the context is likely unusable).
void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "forge_worker: fatal: %s: %s\n", what, err_text(e).c_str());
  std::fflush(stderr);
  std::_Exit(3);
}

class CudaDevice final : public Device {
 public:
  CudaDevice(int index, bool flush_buffer) : m_index(index) {
    check(cudaSetDevice(index), "cudaSetDevice");
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, index), "cudaGetDeviceProperties");
    m_name = prop.name;
    size_t l2 = prop.l2CacheSize > 0 ? static_cast<size_t>(prop.l2CacheSize) : size_t(64) << 20;
    m_flush_bytes = std::max(size_t(256) << 20, 2 * l2);
    if (flush_buffer) check(cudaMalloc(&m_flush, m_flush_bytes), "cudaMalloc (L2 flush buffer)");
    check(cudaEventCreate(&m_start), "cudaEventCreate");
    check(cudaEventCreate(&m_stop), "cudaEventCreate");
  }

  ~CudaDevice() override {
    cudaEventDestroy(m_start);
    cudaEventDestroy(m_stop);
    if (m_flush) cudaFree(m_flush);
  }

  const char* backend() const override { return "cuda"; }
  std::string name() const override { return m_name; }

  void flush_caches(void* stream) override {
    if (!m_flush) return;
    m_value = (m_value + 1) & 0xff;
    check(cudaMemsetAsync(m_flush, m_value, m_flush_bytes, static_cast<cudaStream_t>(stream)),
          "cudaMemsetAsync (L2 flush)");
  }

  double time_us(void* stream, const std::function<void()>& f) override {
    auto s = static_cast<cudaStream_t>(stream);
    check(cudaEventRecord(m_start, s), "cudaEventRecord");
    f();
    check(cudaEventRecord(m_stop, s), "cudaEventRecord");
    check(cudaEventSynchronize(m_stop), "cudaEventSynchronize");
    float ms = 0.f;
    check(cudaEventElapsedTime(&ms, m_start, m_stop), "cudaEventElapsedTime");
    return static_cast<double>(ms) * 1000.0;
  }

  void synchronize(void* stream) override {
    // Errors surface in check_error(); a failing synchronize here is the
    // candidate's (an illegal address, say), not ours.
    (void)cudaStreamSynchronize(static_cast<cudaStream_t>(stream));
  }

  std::string check_error(bool* sticky) override {
    if (sticky) *sticky = false;
    cudaError_t e = cudaGetLastError();
    cudaError_t sync = cudaDeviceSynchronize();
    if (e == cudaSuccess) e = sync;
    if (e == cudaSuccess) return {};
    // A sticky error (illegal address, trap, ...) is reported again by every
    // later call; a non-sticky one (bad launch configuration) was cleared above.
    cudaError_t again = cudaDeviceSynchronize();
    void* probe = nullptr;
    cudaError_t alloc = cudaMalloc(&probe, 256);
    if (alloc == cudaSuccess) cudaFree(probe);
    if (again != cudaSuccess || alloc != cudaSuccess) {
      if (sticky) *sticky = true;
    } else {
      (void)cudaGetLastError();
    }
    return err_text(e);
  }

  std::string capture(void* stream, const std::function<void()>& f) override {
    drop_graph();
    auto s = static_cast<cudaStream_t>(stream);
    cudaError_t e = cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      return "cudaStreamBeginCapture: " + err_text(e);
    }
    f();
    cudaGraph_t graph = nullptr;
    e = cudaStreamEndCapture(s, &graph);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      if (graph) cudaGraphDestroy(graph);
      return "not capturable in a CUDA graph (" + err_text(e) +
             "): work outside the given stream, a synchronization or an allocation";
    }
    e = cudaGraphInstantiate(&m_exec, graph, 0);
    cudaGraphDestroy(graph);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      m_exec = nullptr;
      return "cudaGraphInstantiate: " + err_text(e);
    }
    return {};
  }

  std::string replay(void* stream) override {
    if (!m_exec) return "no captured graph";
    auto s = static_cast<cudaStream_t>(stream);
    cudaError_t e = cudaGraphLaunch(m_exec, s);
    if (e == cudaSuccess) e = cudaStreamSynchronize(s);
    drop_graph();
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      return "CUDA graph replay failed: " + err_text(e);
    }
    return {};
  }

  int64_t free_bytes() override {
    size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) != cudaSuccess) return 0;
    return static_cast<int64_t>(free);
  }

  double copy_ceiling() override {
    const size_t bytes = size_t(1) << 30;
    void* src = nullptr;
    void* dst = nullptr;
    check(cudaMalloc(&src, bytes), "cudaMalloc (ceiling)");
    check(cudaMalloc(&dst, bytes), "cudaMalloc (ceiling)");
    check(cudaMemset(src, 1, bytes), "cudaMemset");
    check(cudaMemset(dst, 0, bytes), "cudaMemset");
    cudaStream_t s = nullptr;
    check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s), "cudaMemcpyAsync");  // warm-up
    double best = 0.0;
    for (int i = 0; i < 5; ++i) {
      double us = time_us(s, [&] {
        check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s), "cudaMemcpyAsync");
      });
      if (us > 0) best = std::max(best, 2.0 * static_cast<double>(bytes) / (us * 1e-6));
    }
    check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    cudaStreamDestroy(s);
    cudaFree(src);
    cudaFree(dst);
    return best;
  }

 private:
  int m_index;
  std::string m_name;
  void* m_flush = nullptr;
  size_t m_flush_bytes = 0;
  int m_value = 0;
  cudaEvent_t m_start = nullptr;
  cudaEvent_t m_stop = nullptr;
  cudaGraphExec_t m_exec = nullptr;

  void drop_graph() {
    if (m_exec) cudaGraphExecDestroy(m_exec);
    m_exec = nullptr;
  }
};

}  // namespace

std::unique_ptr<Device> make_cuda_device(int index, bool flush_buffer) {
  return std::make_unique<CudaDevice>(index, flush_buffer);
}

}  // namespace forge::worker

// ---------------------------------------------------------------------------
// The CUDA exchange arena (arena.h): one cudaMalloc, exported by IPC handle.

#include "arena.h"

namespace forge::worker {
namespace {

class CudaArena final : public Arena {
 public:
  CudaArena(int64_t capacity, int device) {
    check(cudaSetDevice(device), "cudaSetDevice");
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, static_cast<size_t>(capacity));
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      throw ArenaAllocationFailed("cudaMalloc of a " + std::to_string(capacity >> 20) + " MiB exchange arena: " +
                               err_text(e));
    }
    check(cudaIpcGetMemHandle(&m_handle, p), "cudaIpcGetMemHandle");
    m_base = static_cast<char*>(p);
    m_capacity = capacity;
  }
  ~CudaArena() override { cudaFree(m_base); }
  bool cuda() const override { return true; }
  const void* ipc_handle() const override { return &m_handle; }
  int64_t ipc_bytes() const override { return sizeof m_handle; }

 private:
  cudaIpcMemHandle_t m_handle{};
};

}  // namespace

std::unique_ptr<Arena> make_cuda_arena(int64_t capacity, int device) {
  return std::make_unique<CudaArena>(capacity, device);
}

}  // namespace forge::worker
