// CUPTI device timer (see timer.h). UNTESTED: written and compiled on a machine
// without a GPU; it has not run on one yet.
//
// How it works: the recorder pushes an external correlation id
// (CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2; Kineto uses CUSTOM0/1) for the
// duration of each CUDA backend op. CUPTI then emits, for every CUDA API call
// made in that window, an EXTERNAL_CORRELATION record mapping the API call's
// correlation id to ours; the device activity records (CONCURRENT_KERNEL,
// MEMCPY, MEMSET) carry the API call's correlation id and start/end
// timestamps. Joining the two charges device time to the op.
//
// CUPTI allows one owner of the activity buffers per process. While
// torch.profiler (Kineto) runs it registers its own buffer callbacks; we stop
// pushing ids then and re-register ours on the first op after it stopped.
//
// CUPTI is opened with dlopen (preferring the copy torch already loaded), so
// the library has no link-time dependency on it. This file is torch-free.
#include <cupti.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

#include "timer.h"

namespace forge::capture {
namespace {

struct Api {
  decltype(&cuptiGetVersion) GetVersion = nullptr;
  decltype(&cuptiGetResultString) GetResultString = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) RegisterCallbacks = nullptr;
  decltype(&cuptiActivityEnable) Enable = nullptr;
  decltype(&cuptiActivityDisable) Disable = nullptr;
  decltype(&cuptiActivityFlushAll) FlushAll = nullptr;
  decltype(&cuptiActivityGetNextRecord) GetNextRecord = nullptr;
  decltype(&cuptiActivityPushExternalCorrelationId) Push = nullptr;
  decltype(&cuptiActivityPopExternalCorrelationId) Pop = nullptr;
};

#if CUPTI_API_VERSION >= 130000
using KernelRecord = CUpti_ActivityKernel10;
#else
using KernelRecord = CUpti_ActivityKernel9;
#endif

constexpr CUpti_ExternalCorrelationKind kKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2;
constexpr size_t kBufferBytes = 4u << 20;
constexpr size_t kMaxPending = size_t{1} << 22;  // joins pending; records of one flush can be many  // cap on unjoined records kept

class CuptiTimer;
std::atomic<CuptiTimer*> g_timer{nullptr};

class CuptiTimer final : public DeviceTimer {
 public:
  explicit CuptiTimer(const Api& api) : api_(api) {}

  const char* method() const override { return "cupti"; }

  bool take(std::string* why) {
    CUptiResult r = api_.RegisterCallbacks(&CuptiTimer::buffer_requested, &CuptiTimer::buffer_completed);
    if (r != CUPTI_SUCCESS) return fail(why, "cuptiActivityRegisterCallbacks", r);
    // External-correlation records are emitted for recorded CUDA API calls only, so
    // the runtime and driver API kinds must be on too (seen on the H200: without
    // them kernels arrive but no external record, and nothing joins).
    const CUpti_ActivityKind kinds[] = {CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER,
                                        CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
                                        CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                        CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET};
    for (CUpti_ActivityKind k : kinds) {
      r = api_.Enable(k);
      if (r != CUPTI_SUCCESS) return fail(why, "cuptiActivityEnable", r);
    }
    owned_ = true;
    return true;
  }

  bool begin(uint64_t id, bool profiler_active) override {
    if (profiler_active) {
      // Kineto owns CUPTI now; its callbacks receive the records.
      if (owned_.exchange(false)) yields_++;
      return false;
    }
    if (!owned_) {
      std::lock_guard<std::mutex> lk(take_mu_);
      if (!owned_) {
        std::string why;
        if (!take(&why)) {
          set_status("lost: " + why);
          return false;
        }
      }
    }
    bool ok = api_.Push(kKind, id) == CUPTI_SUCCESS;
    (ok ? n_push_ : n_push_fail_)++;
    return ok;
  }

  void end() override {
    uint64_t last = 0;
    api_.Pop(kKind, &last);
  }

  void collect(std::unordered_map<uint64_t, DeviceTime>& out) override {
    if (owned_) api_.FlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);  // outside mu_: calls buffer_completed
    std::lock_guard<std::mutex> lk(mu_);
    for (auto& [id, t] : totals_) {
      out[id].ns += t.ns;
      out[id].kernels += t.kernels;
    }
    // Device work with no external correlation: launched outside any backend
    // op (CUDA graph replays, NCCL, code that bypasses the dispatcher).
    for (auto& [corr, t] : unjoined_) {
      out[0].ns += t.ns;
      out[0].kernels += t.kernels;
    }
  }

  std::string status() const override {
    std::lock_guard<std::mutex> lk(mu_);
    std::string s = status_;
    // Counters: where a timing that comes out empty got lost.
    s += " [buffers " + std::to_string(n_buffers_) + ", kernels " + std::to_string(n_kernels_) +
         ", copies " + std::to_string(n_copies_) + ", externals " + std::to_string(n_external_) +
         ", pushes " + std::to_string(n_push_.load()) + ", push failures " +
         std::to_string(n_push_fail_.load()) + ", unjoined " + std::to_string(unjoined_.size()) + "]";
    if (yields_) s += " (yielded to torch.profiler " + std::to_string(yields_.load()) + "x)";
    return s;
  }

 private:
  bool fail(std::string* why, const char* what, CUptiResult r) {
    const char* msg = nullptr;
    if (api_.GetResultString) api_.GetResultString(r, &msg);
    *why = std::string(what) + ": " + (msg ? msg : std::to_string(static_cast<int>(r)));
    return false;
  }

  void set_status(std::string s) {
    std::lock_guard<std::mutex> lk(mu_);
    status_ = std::move(s);
  }

  void add_activity(uint32_t corr, int64_t ns) {
    auto e = ext_by_corr_.find(corr);
    if (e != ext_by_corr_.end()) {
      DeviceTime& t = totals_[e->second];
      t.ns += ns;
      t.kernels++;
      return;
    }
    if (unjoined_.size() >= kMaxPending) {
      // Keep memory bounded: what has not been joined by now stays unattributed.
      for (auto& [c, t] : unjoined_) {
        totals_[0].ns += t.ns;
        totals_[0].kernels += t.kernels;
      }
      unjoined_.clear();
    }
    DeviceTime& t = unjoined_[corr];
    t.ns += ns;
    t.kernels++;
  }

  void add_external(uint32_t corr, uint64_t id) {
    if (ext_by_corr_.size() >= kMaxPending) ext_by_corr_.clear();
    ext_by_corr_[corr] = id;
    auto u = unjoined_.find(corr);
    if (u != unjoined_.end()) {
      DeviceTime& t = totals_[id];
      t.ns += u->second.ns;
      t.kernels += u->second.kernels;
      unjoined_.erase(u);
    }
  }

  void parse(uint8_t* buffer, size_t valid) {
    std::lock_guard<std::mutex> lk(mu_);
    n_buffers_++;
    CUpti_Activity* rec = nullptr;
    while (api_.GetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
      switch (rec->kind) {
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
        case CUPTI_ACTIVITY_KIND_KERNEL: {
          auto* k = reinterpret_cast<KernelRecord*>(rec);
          n_kernels_++;
          add_activity(k->correlationId, static_cast<int64_t>(k->end - k->start));
          break;
        }
        case CUPTI_ACTIVITY_KIND_MEMCPY: {
          auto* m = reinterpret_cast<CUpti_ActivityMemcpy6*>(rec);
          n_copies_++;
          add_activity(m->correlationId, static_cast<int64_t>(m->end - m->start));
          break;
        }
        case CUPTI_ACTIVITY_KIND_MEMSET: {
          auto* m = reinterpret_cast<CUpti_ActivityMemset4*>(rec);
          add_activity(m->correlationId, static_cast<int64_t>(m->end - m->start));
          break;
        }
        case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
          auto* x = reinterpret_cast<CUpti_ActivityExternalCorrelation*>(rec);
          n_external_++;
          if (x->externalKind == kKind) add_external(x->correlationId, x->externalId);
          break;
        }
        default:
          break;
      }
    }
  }

  static void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
    *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
    *size = *buffer ? kBufferBytes : 0;
    *max_records = 0;
  }

  static void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
    if (CuptiTimer* t = g_timer.load()) {
      if (valid > 0) t->parse(buffer, valid);
    }
    std::free(buffer);
  }

  Api api_;
  std::atomic<bool> owned_{false};
  std::atomic<uint64_t> yields_{0};
  std::mutex take_mu_;
  uint64_t n_buffers_ = 0, n_kernels_ = 0, n_copies_ = 0, n_external_ = 0;  // under mu_
  std::atomic<uint64_t> n_push_{0}, n_push_fail_{0};
  mutable std::mutex mu_;
  std::string status_ = "ok";
  std::unordered_map<uint32_t, uint64_t> ext_by_corr_;
  std::unordered_map<uint32_t, DeviceTime> unjoined_;
  std::unordered_map<uint64_t, DeviceTime> totals_;
};

void* open_cupti() {
  const char* names[] = {"libcupti.so.13", "libcupti.so.12", "libcupti.so"};
  for (const char* n : names)
    if (void* h = dlopen(n, RTLD_NOW | RTLD_NOLOAD)) return h;  // the copy torch loaded
  for (const char* n : names)
    if (void* h = dlopen(n, RTLD_NOW)) return h;
  return nullptr;
}

template <typename F>
bool sym(void* h, const char* name, F& f) {
  f = reinterpret_cast<F>(dlsym(h, name));
  return f != nullptr;
}

}  // namespace

std::unique_ptr<DeviceTimer> make_cupti_timer(std::string* why) {
  if (const char* off = std::getenv("FORGE_CAPTURE_CUPTI"); off && std::strcmp(off, "0") == 0) {
    *why = "FORGE_CAPTURE_CUPTI=0";
    return nullptr;
  }
  void* h = open_cupti();
  if (!h) {
    *why = "libcupti not found";
    return nullptr;
  }
  Api api;
  if (!sym(h, "cuptiGetVersion", api.GetVersion) ||
      !sym(h, "cuptiGetResultString", api.GetResultString) ||
      !sym(h, "cuptiActivityRegisterCallbacks", api.RegisterCallbacks) ||
      !sym(h, "cuptiActivityEnable", api.Enable) || !sym(h, "cuptiActivityDisable", api.Disable) ||
      !sym(h, "cuptiActivityFlushAll", api.FlushAll) ||
      !sym(h, "cuptiActivityGetNextRecord", api.GetNextRecord) ||
      !sym(h, "cuptiActivityPushExternalCorrelationId", api.Push) ||
      !sym(h, "cuptiActivityPopExternalCorrelationId", api.Pop)) {
    *why = "libcupti lacks a needed symbol";
    return nullptr;
  }
  uint32_t version = 0;
  if (api.GetVersion(&version) != CUPTI_SUCCESS || version / 10000 != CUPTI_API_VERSION / 10000) {
    // Activity record layouts are only known for the CUPTI major we compiled against.
    *why = "libcupti API version " + std::to_string(version) + " != compiled " +
           std::to_string(CUPTI_API_VERSION);
    return nullptr;
  }
  auto t = std::make_unique<CuptiTimer>(api);
  g_timer.store(t.get());
  if (!t->take(why)) {
    g_timer.store(nullptr);
    return nullptr;
  }
  return t;
}

}  // namespace forge::capture
