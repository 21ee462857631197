// The capture's shared state: what the recorder aggregates (one Entry per
// (backend op, signature), the outermost-op totals, the sample counters) and the
// report writes. One State per process, reached through g_state; it is never
// freed, so late callbacks and exit handlers never touch a destroyed object
// (docs/CAPTURE.md). Torch-free.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "timer.h"

namespace forge::capture {

struct OpInfo;  // op_facts.h

inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Outermost-op aggregation.
struct OuterStat {
  uint64_t calls = 0;
  int64_t ns = 0;
  int64_t backend_ns = 0;
};

// One (backend op, signature).
struct Entry {
  uint64_t id = 0;  // 1-based, for the device timer
  OpInfo* op = nullptr;
  std::string kind;         // kernel | composite | view | alloc | foreign
  std::string dispatch_key; // CPU | CUDA
  std::string signature;
  std::string args_json;
  std::string outputs_json;  // the first call's returns, same format as args
  uint64_t calls = 0;
  int64_t wall_ns = 0;
  bool needs_grad = false;  // some call had grad mode on and an input requiring grad
  std::map<OpInfo*, uint64_t> outer;  // outermost op -> calls
  int sample_attempts = 0;
  int samples_retracted = 0;          // claims given back by calls that threw (recorder.cpp)
  std::vector<std::string> samples;   // JSON objects
  uint64_t samples_dropped = 0;
  std::set<int> changed;  // inputs a watched call changed (changes.h)
  std::map<std::string, uint64_t> modules;  // module path the call ran under (modules.h) -> calls
};

struct Config {
  std::string dir;
  int samples = 2;
  int64_t max_bytes = int64_t(1) << 30;
};

struct State {
  Config cfg;
  int pid = 0;
  int64_t t_start_ns = 0;
  std::mutex mu;  // everything below
  std::unordered_map<std::string, std::unique_ptr<Entry>> entries;
  // Per signature, the entries keyed by it and its Python numbers (recorder.cpp).
  std::unordered_map<std::string, std::unordered_set<std::string>> number_keys;
  std::unordered_map<OpInfo*, OuterStat> outer;
  std::map<std::string, std::string> info;  // forge_capture::note()
  uint64_t next_entry_id = 1;
  uint64_t op_calls = 0;
  uint64_t samples_dropped = 0;
  uint64_t samples_skipped_graph_capture = 0;
  bool dirty = true;
  int flushes = 0;
  std::string last_error;
  // Outside mu.
  std::atomic<int64_t> sample_bytes{0};
  std::atomic<uint64_t> sample_files{0};
  std::atomic<uint64_t> next_sample{0};
  std::atomic<int64_t> overhead_ns{0};
  // Device timer (CUDA builds with CUPTI).
  std::once_flag timer_once;
  std::unique_ptr<DeviceTimer> timer;
  std::string timer_status = "none";
};

// The process's state; nullptr while capture is off (set up in recorder.cpp).
extern std::atomic<State*> g_state;

}  // namespace forge::capture
