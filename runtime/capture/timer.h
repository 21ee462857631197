// Device timing for the capture library, behind a small interface so that the
// recorder (recorder.cpp) does not care how device time is measured.
//
// CPU backend ops are timed by the recorder itself (steady_clock wall time
// between the RecordFunction start and end callbacks, minus the recorder's own
// overhead): on the CPU that *is* the kernel time. CUDA kernels run
// asynchronously, so wall time there is only launch time; a DeviceTimer charges
// the device work an op launched to that op. The one implementation is the
// CUPTI timer (timer_cupti.cpp, compiled only in CUDA builds where cupti.h is
// found; CUPTI is opened with dlopen at run time). This header is torch-free.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

namespace forge::capture {

struct DeviceTime {
  int64_t ns = 0;         // summed device duration of kernels, memcpys and memsets
  uint64_t kernels = 0;   // how many device activities were summed
};

class DeviceTimer {
 public:
  virtual ~DeviceTimer() = default;
  // Name written to the JSON "timing" fields, e.g. "cupti".
  virtual const char* method() const = 0;
  // Called (on the calling thread) when a backend op on the device starts and
  // ends. Device work launched by this thread in between is charged to `id`.
  // `profiler_active`: torch.profiler (Kineto) currently owns CUPTI; the timer
  // must then stay out of its way and re-take CUPTI after it stops.
  // Returns false when this call could not be timed (the op keeps wall time).
  virtual bool begin(uint64_t id, bool profiler_active) = 0;
  virtual void end() = 0;
  // Waits for outstanding records and adds device time per id to `out`.
  // Work that could not be attributed is added under id 0.
  virtual void collect(std::unordered_map<uint64_t, DeviceTime>& out) = 0;
  // One line for the JSON ("ok", or why it stopped or never started).
  virtual std::string status() const = 0;
};

#if defined(FORGE_CAPTURE_CUPTI)
// nullptr (with *why set) when CUPTI cannot be opened or enabled.
std::unique_ptr<DeviceTimer> make_cupti_timer(std::string* why);
#endif

}  // namespace forge::capture
