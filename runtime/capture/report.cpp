// The capture's report (report.h): the per-process JSON, written to a
// temporary file and renamed, and the forge_capture ops for the Python side.
#ifndef NDEBUG
#error "build with -DNDEBUG: RecordFunction's layout depends on it (see docs/CAPTURE.md)"
#endif

#include "report.h"

#include "flows.h"
#include "modules.h"

#include <torch/library.h>
#include <torch/version.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string_view>
#include <unordered_set>

#include "../common/sample_part.h"
#include "json.h"
#include "op_facts.h"
#include "state.h"

namespace forge::capture {
namespace {

std::string read_cmdline_json() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string js = "[";
  size_t start = 0;
  bool first = true;
  while (start < raw.size()) {
    size_t end = raw.find('\0', start);
    if (end == std::string::npos) end = raw.size();
    if (!first) js += ',';
    first = false;
    json::str(js, std::string_view(raw).substr(start, end - start));
    start = end + 1;
  }
  return js + "]";
}

std::string cwd() {
  char buf[4096];
  return ::getcwd(buf, sizeof buf) ? std::string(buf) : std::string();
}

std::string flush_impl(State& st) {
  std::unordered_map<uint64_t, DeviceTime> device;
  if (st.timer) st.timer->collect(device);

  std::lock_guard<std::mutex> lk(st.mu);
  bool use_device = st.timer != nullptr;
  const char* method = use_device ? st.timer->method() : "cpu_wall";

  struct Row {
    Entry* e;
    int64_t time_ns;
    bool device;
  };
  std::vector<Row> rows;
  int64_t total_ns = 0;
  for (auto& [sig, e] : st.entries) {
    if (e->calls == 0) continue;  // only ever seen as a decomposition
    Row r{e.get(), e->wall_ns, false};
    if (use_device && e->dispatch_key == "CUDA") {
      auto it = device.find(e->id);
      r.time_ns = it == device.end() ? 0 : it->second.ns;
      r.device = true;
    }
    total_ns += r.time_ns;
    rows.push_back(r);
  }
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    if (a.time_ns != b.time_ns) return a.time_ns > b.time_ns;
    return a.e->signature < b.e->signature;
  });
  int64_t unattributed_ns = 0;
  if (use_device) {
    std::unordered_set<uint64_t> shown;
    for (const Row& r : rows)
      if (r.device) shown.insert(r.e->id);
    for (auto& [id, dt] : device)
      if (!shown.count(id)) unattributed_ns += dt.ns;
  }

  std::string js;
  js.reserve(1 << 16);
  js += "{\n\"version\":1";
  js += ",\n\"pid\":";
  json::num(js, static_cast<int64_t>(::getpid()));
  js += ",\n\"ppid\":";
  json::num(js, static_cast<int64_t>(::getppid()));
  js += ",\n\"argv\":" + read_cmdline_json();
  js += ",\n\"cwd\":";
  json::str(js, cwd());
  js += ",\n\"torch_version\":";
  json::str(js, TORCH_VERSION);
  js += ",\n\"torch_cuda_build\":";
#if defined(FORGE_CAPTURE_CUDA)
  json::boolean(js, true);
#else
  json::boolean(js, false);
#endif
  js += ",\n\"info\":{";
  {
    bool first = true;
    for (auto& [k, v] : st.info) {
      if (!first) js += ',';
      first = false;
      json::str(js, k);
      js += ':';
      json::str(js, v);
    }
  }
  js += "}";
  js += ",\n\"timing\":";
  json::str(js, method);
  js += ",\n\"device_timer\":";
  json::str(js, use_device ? st.timer->status() : st.timer_status);
  js += ",\n\"samples_per_signature\":";
  json::num(js, static_cast<int64_t>(st.cfg.samples));
  js += ",\n\"max_sample_bytes\":";
  json::num(js, st.cfg.max_bytes);
  js += ",\n\"max_sample_tensor_bytes\":";
  json::num(js, sample_part::tensor_limit_bytes(st.cfg.max_bytes));
  js += ",\n\"sample_bytes\":";
  json::num(js, st.sample_bytes.load());
  js += ",\n\"sample_files\":";
  json::num(js, st.sample_files.load());
  js += ",\n\"samples_dropped\":";
  json::num(js, st.samples_dropped);
  js += ",\n\"samples_skipped_graph_capture\":";
  json::num(js, st.samples_skipped_graph_capture);
  js += ",\n\"capture_wall_us\":";
  json::micros(js, now_ns() - st.t_start_ns);
  js += ",\n\"overhead_us\":";
  json::micros(js, st.overhead_ns.load());
  js += ",\n\"outer_op_calls\":";
  json::num(js, st.op_calls);
  js += ",\n\"total_backend_time_us\":";
  json::micros(js, total_ns);
  int64_t total_outer = 0;
  for (auto& [op, o] : st.outer) total_outer += o.ns;
  js += ",\n\"total_outer_time_us\":";
  json::micros(js, total_outer);
  if (use_device) {
    js += ",\n\"unattributed_device_time_us\":";
    json::micros(js, unattributed_ns);
  }
  if (!st.last_error.empty()) {
    js += ",\n\"last_error\":";
    json::str(js, st.last_error);
  }
  js += ",\n\"backend_ops\":[";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Entry& e = *rows[i].e;
    js += i ? ",\n" : "\n";
    js += "{\"id\":";
    json::num(js, e.id);
    js += ",\"op\":";
    json::str(js, e.op->name);
    js += ",\"overload\":";
    json::str(js, e.op->overload);
    js += ",\"kind\":";
    json::str(js, e.kind);
    js += ",\"dispatch_key\":";
    json::str(js, e.dispatch_key);
    OpInfo* top = nullptr;
    uint64_t top_n = 0;
    for (auto& [o, n] : e.outer)
      if (n > top_n || (n == top_n && top && o && o->qualified < top->qualified)) {
        top = o;
        top_n = n;
      }
    js += ",\"outer_op\":";
    json::str(js, top ? top->qualified : e.op->qualified);
    js += ",\"outer_ops\":{";
    {
      bool first = true;
      for (auto& [o, n] : e.outer) {
        if (!first) js += ',';
        first = false;
        json::str(js, o ? o->qualified : e.op->qualified);
        js += ':';
        json::num(js, n);
      }
    }
    js += "},\"signature\":";
    json::str(js, e.signature);
    js += ",\"args\":";
    js += e.args_json.empty() ? "[]" : e.args_json;
    js += ",\"outputs\":";
    js += e.outputs_json.empty() ? "[]" : e.outputs_json;
    js += ",\"needs_grad\":";
    json::boolean(js, e.needs_grad);
    js += ",\"calls\":";
    json::num(js, e.calls);
    js += ",\"time_us\":";
    json::micros(js, rows[i].time_ns);
    js += ",\"wall_us\":";
    json::micros(js, e.wall_ns);
    js += ",\"timing\":";
    json::str(js, rows[i].device ? method : "cpu_wall");
    if (rows[i].device) {
      auto it = device.find(e.id);
      js += ",\"device_activities\":";
      json::num(js, it == device.end() ? uint64_t(0) : it->second.kernels);
    }
    {
      // The module path most calls ran under ("" outside any), and every one.
      const std::string* top_path = nullptr;
      uint64_t top_calls = 0;
      for (const auto& [path, n] : e.modules)
        if (n > top_calls) top_path = &path, top_calls = n;
      js += ",\"module\":";
      json::str(js, top_path ? *top_path : std::string());
      js += ",\"modules\":{";
      bool first = true;
      for (const auto& [path, n] : e.modules) {
        if (!first) js += ',';
        first = false;
        json::str(js, path);
        js += ':';
        json::num(js, n);
      }
      js += '}';
    }
    std::set<int> changed = e.changed;
    changed.insert(e.op->write_args.begin(), e.op->write_args.end());
    if (!changed.empty()) {
      js += ",\"changed\":[";
      bool first = true;
      for (int i : changed) {
        if (!first) js += ',';
        first = false;
        json::num(js, static_cast<int64_t>(i));
      }
      js += ']';
    }
    js += ",\"samples_dropped\":";
    json::num(js, e.samples_dropped);
    js += ",\"samples\":[";
    for (size_t k = 0; k < e.samples.size(); ++k) {
      if (k) js += ',';
      js += e.samples[k];
    }
    js += "]}";
  }
  js += "\n]";
  write_flows_locked(st, js);
  js += ",\n\"outer_ops\":[";
  std::vector<std::pair<OpInfo*, OuterStat>> outer(st.outer.begin(), st.outer.end());
  std::sort(outer.begin(), outer.end(), [](const auto& a, const auto& b) {
    if (a.second.ns != b.second.ns) return a.second.ns > b.second.ns;
    return a.first->qualified < b.first->qualified;
  });
  for (size_t i = 0; i < outer.size(); ++i) {
    const OpInfo& op = *outer[i].first;
    const OuterStat& o = outer[i].second;
    js += i ? ",\n" : "\n";
    js += "{\"op\":";
    json::str(js, op.name);
    js += ",\"overload\":";
    json::str(js, op.overload);
    js += ",\"name\":";
    json::str(js, op.qualified);
    js += ",\"calls\":";
    json::num(js, o.calls);
    js += ",\"time_us\":";
    json::micros(js, o.ns);
    js += ",\"backend_time_us\":";
    json::micros(js, o.backend_ns);
    js += "}";
  }
  js += "\n]\n}\n";

  std::string path = st.cfg.dir + "/" + std::to_string(::getpid()) + ".json";
  std::string tmp = st.cfg.dir + "/." + std::to_string(::getpid()) + ".json.tmp";
  if (!write_file(tmp, js.data(), js.size()) || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::fprintf(stderr, "forge: warning: cannot write %s: %s\n", path.c_str(), std::strerror(errno));
    return std::string();
  }
  st.dirty = false;
  st.flushes++;
  return path;
}

}  // namespace

bool write_file(const std::string& path, const void* data, size_t n) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      ::close(fd);
      return false;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return ::close(fd) == 0;
}

std::string flush() {
  State* st = g_state.load(std::memory_order_acquire);
  if (!st) return std::string();
  try {
    return flush_impl(*st);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "forge: warning: capture flush failed: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "forge: warning: capture flush failed\n");
  }
  return std::string();
}

void atexit_flush() {
  State* st = g_state.load(std::memory_order_acquire);
  if (!st) return;
  bool need;
  {
    std::lock_guard<std::mutex> lk(st->mu);
    need = st->dirty || st->flushes == 0;
  }
  if (need) flush();
}

}  // namespace forge::capture

// Ops for the Python side (runtime/autoload registers flush() with atexit).
TORCH_LIBRARY(forge_capture, m) {
  m.def("flush() -> str", []() -> std::string { return forge::capture::flush(); });
  m.def("enabled() -> bool",
        []() -> bool { return forge::capture::g_state.load() != nullptr; });
  m.def("enter_module(str name) -> ()", [](std::string name) { forge::capture::enter_module(name); });
  m.def("exit_module() -> ()", []() { forge::capture::exit_module(); });
  m.def("note(str key, str value) -> ()", [](std::string key, std::string value) {
    auto* st = forge::capture::g_state.load();
    if (!st) return;
    std::lock_guard<std::mutex> lk(st->mu);
    st->info[key] = value;
  });
}
