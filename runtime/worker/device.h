// The device side of the evaluation worker that torch does not give us: timing,
// cache flushing, error checks after a candidate call, the CUDA-graph capture
// check and the CUDA copy ceiling. Torch-free on purpose: device_cpu.cpp needs
// nothing, device_cuda.cpp needs only the CUDA runtime headers, and the CPU
// build of the worker never sees a CUDA header.
//
// Streams are passed as `void*` (a cudaStream_t on CUDA, ignored on the CPU).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace forge::worker {

class Device {
 public:
  virtual ~Device() = default;

  // "cpu" or "cuda".
  virtual const char* backend() const = 0;
  // Human-readable name for the hello line ("NVIDIA H200", "AMD EPYC (2 threads)").
  virtual std::string name() const = 0;

  // Evicts the last-level cache (CPU) or L2 (CUDA, enqueued on `stream`) by
  // writing a buffer at least twice its size. Called before every timed rep.
  virtual void flush_caches(void* stream) = 0;

  // Times one call of f: steady clock around the call (CPU), or CUDA events
  // recorded on `stream` right before and after it (CUDA). Microseconds.
  virtual double time_us(void* stream, const std::function<void()>& f) = 0;

  // Waits until everything enqueued on `stream` has finished (no-op on CPU).
  virtual void synchronize(void* stream) = 0;

  // After a candidate call (and a synchronize): "" when no error is pending,
  // otherwise the error's text. *sticky is set when the context is unusable
  // (the worker must exit after replying).
  virtual std::string check_error(bool* sticky) = 0;

  // CUDA only: captures f on `stream` into a CUDA graph (global capture mode,
  // so work on the legacy default stream or a device-wide synchronize fails
  // the capture) and instantiates it; replay() launches it once and waits. In
  // between the caller poisons the outputs: work done eagerly on another
  // stream during the capture is then not in the replay's results. Return ""
  // or the error's text. The CPU device returns "" without calling f.
  virtual std::string capture(void* stream, const std::function<void()>& f) = 0;
  virtual std::string replay(void* stream) = 0;

  // CUDA: device-to-device copy ceiling (read + write bytes per second, best of
  // several 1 GiB copies timed with events). CPU: 0 (the evaluator measures it
  // with torch's multi-threaded copy).
  virtual double copy_ceiling() = 0;

  // Bytes free for this process's allocations now: CUDA, cudaMemGetInfo's
  // free; CPU, /proc/meminfo's MemAvailable. 0 when unknown.
  virtual int64_t free_bytes() = 0;
};

// flush_buffer false: flush_caches() does nothing (the runner: the judge flushes).
std::unique_ptr<Device> make_cpu_device(bool flush_buffer = true);

#if defined(FORGE_WORKER_CUDA)
// Defined in device_cuda.cpp; `index` is the CUDA device ordinal.
std::unique_ptr<Device> make_cuda_device(int index, bool flush_buffer = true);
#endif

}  // namespace forge::worker
