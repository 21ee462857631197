// The capture's recorder, the heart of libforge_capture.so (docs/CAPTURE.md:
// the contract, the JSON schema and the rules). Loaded into the user's
// unchanged program (runtime/autoload makes `import torch` load it;
// forge_run_torchscript links it). When FORGE_CAPTURE_DIR is set it installs
// one global RecordFunction callback that sees every ATen op call, works out
// which op reaches a real backend kernel (the "backend op") and aggregates
// calls and time per (backend op, signature) into State (state.h).
//
// This file: the callbacks, the per-thread stack of open calls, the
// classification of each call, and the set-up from the environment. The other
// pieces: op_facts.h (what the dispatcher says about an op; signatures),
// samples.h (copies of real inputs), report.h (FORGE_CAPTURE_DIR/<pid>.json).
#ifndef NDEBUG
#error "build with -DNDEBUG: RecordFunction's layout depends on it (see docs/CAPTURE.md)"
#endif

#include <ATen/Parallel.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/record_function.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/csrc/profiler/orchestration/observer.h>

#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "changes.h"
#include "flows.h"
#include "modules.h"
#include "op_facts.h"
#include "report.h"
#include "samples.h"
#include "state.h"
#include "timer.h"

namespace forge::capture {

std::atomic<State*> g_state{nullptr};

namespace {

bool g_debug = false;  // FORGE_CAPTURE_DEBUG=1: trace every recorded op to stderr
at::CallbackHandle g_callback = 0;

// ---------------------------------------------------------------------------
// Per-thread recorder state

enum class Role : uint8_t {
  Skip,             // not an op, or not recorded (our ops, intra-op worker threads)
  Suppressed,       // nested inside a backend op: part of its time
  Transparent,      // composite (decomposes) or not classifiable: look at nested ops
  Backend,          // definite backend op, aggregated at its end
  IgnorablePending, // view/alloc op inside a tentative: kept until the tentative resolves
  Tentative,        // CompositeExplicitAutograd op: backend op unless a nested op is
};

enum class Cls : uint8_t { Transparent, Kernel, Composite, Ignorable, Foreign };

struct PendingOp {
  OpInfo* op;
  std::string kind;
  std::string key;
  Described d;
  int64_t ns;
};

struct Extra {
  Described d;                       // Tentative, IgnorablePending
  std::string kind;
  std::string key;                   // dispatch key name
  std::optional<Sample> sample;      // Tentative: held until committed
  Committed committed;               // Backend: the sample committed at its start, for retract_sample
  std::vector<PendingOp> pending;    // Tentative: nested views/allocs
  std::vector<Watched> watched;      // the sampled call's inputs before it (changes.h)
  std::vector<FlowInput> flow_in;    // Backend, Tentative: the tensor inputs (flows.h)
  std::vector<c10::IValue> held;     // implicit: its inputs (a RecordFunction's are gone at its end)
};

struct Frame {
  const at::RecordFunction* rf = nullptr;
  OpInfo* op = nullptr;
  Role role = Role::Skip;
  bool outermost = false;
  bool dropped = false;     // Tentative: a nested op turned out to be the backend op
  // Transparent CompositeImplicitAutograd aten op on the CPU (no view, alloc
  // or written argument), and what ran inside it: one that allocated and ran
  // no kernel computed its output itself.
  bool implicit = false;
  bool nested_kernel = false;
  bool nested_alloc = false;
  bool device_timed = false;
  // std::uncaught_exceptions() at its start: more at its end means the call
  // threw (RecordFunction ends it while unwinding), and it is not recorded.
  int uncaught = 0;
  int64_t t0 = 0;
  int64_t ov0 = 0;
  Entry* entry = nullptr;
  std::unique_ptr<Extra> x;
};

struct ThreadState {
  std::vector<Frame> stack;
  std::vector<size_t> tentatives;  // indices of Tentative frames in stack
  std::vector<size_t> implicits;   // indices of open implicit frames (Frame::implicit)
  int suppress = 0;                // open Backend / IgnorablePending frames
  int op_depth = 0;                // open op frames (not Skip)
  OpInfo* outer = nullptr;         // outermost op of the current chain
  int64_t overhead_ns = 0;         // time spent in our callbacks on this thread
  int64_t backend_ns = 0;          // backend time inside the current outermost op
  std::unordered_map<const char*, OpInfo*> cache;  // RecordFunction::name() -> info
};

thread_local ThreadState* t_state = nullptr;
thread_local bool t_dead = false;

struct ThreadStateOwner {
  bool touched = false;
  ~ThreadStateOwner() {
    t_dead = true;
    delete t_state;
    t_state = nullptr;
  }
};
thread_local ThreadStateOwner t_owner;

ThreadState* thread_state() {
  if (t_state) return t_state;
  if (t_dead) return nullptr;
  t_owner.touched = true;  // constructs it: registers the thread_local destructor
  t_state = new ThreadState;
  t_state->stack.reserve(64);
  return t_state;
}

OpInfo* lookup(ThreadState& ts, const at::RecordFunction& fn) {
  const char* nm = fn.name();
  auto it = ts.cache.find(nm);
  if (it != ts.cache.end() && std::strcmp(it->second->name.c_str(), nm) == 0) return it->second;
  auto on = fn.operator_name();
  if (!on) return nullptr;
  OpInfo* info = global_op_info(*on);
  ts.cache[nm] = info;
  return info;
}

struct Classified {
  Cls cls = Cls::Transparent;
  const char* key = "";
  bool any_cuda = false;
};

// Which dispatch key's kernel this call reaches, and what kind of op it is there.
Classified classify(const OpInfo& op, c10::ArrayRef<const c10::IValue> inputs) {
  Classified c;
  if (!op.known) return c;
  c10::DispatchKeySet ks;
  bool any_cpu = false, any_other = false, any_tensor = false;
  std::optional<c10::Device> device_arg;
  auto add = [&](const at::Tensor& t) {
    if (!t.defined()) return;
    any_tensor = true;
    ks = ks | t.key_set();
    if (t.layout() != c10::kStrided || t.is_quantized() || t.is_nested()) any_other = true;
    switch (t.device().type()) {
      case c10::DeviceType::CPU: any_cpu = true; break;
      case c10::DeviceType::CUDA: c.any_cuda = true; break;
      default: any_other = true;
    }
  };
  for (const auto& v : inputs) {
    if (v.isTensor()) {
      add(v.toTensor());
    } else if (v.isTensorList()) {
      auto l = v.toTensorList();
      for (size_t i = 0; i < l.size(); ++i) add(l.get(i));
    } else if (v.isList()) {
      auto l = v.toList();
      for (size_t i = 0; i < l.size(); ++i)
        if (l.get(i).isTensor()) add(l.get(i).toTensor());
    } else if (v.isDevice() && !device_arg) {
      device_arg = v.toDevice();
    }
  }
  if (any_other) return c;
  auto local = c10::impl::tls_local_dispatch_key_set();
  c10::DispatchKeySet eff = (ks | local.included_) - local.excluded_;
  // Python modes and subclasses (FakeTensor, TorchDispatchMode), functionalization
  // and vmap re-enter the dispatcher with the real call: classify that one.
  static const c10::DispatchKeySet wrappers({c10::DispatchKey::Python, c10::DispatchKey::PythonTLSSnapshot,
                                             c10::DispatchKey::PythonDispatcher,
                                             c10::DispatchKey::Functionalize,
                                             c10::DispatchKey::FuncTorchDynamicLayerFrontMode,
                                             c10::DispatchKey::FuncTorchBatched,
                                             c10::DispatchKey::Batched});
  if (eff.has_any(wrappers)) return c;
  bool cuda = c.any_cuda;
  if (!any_tensor) {
    if (device_arg && device_arg->type() == c10::DeviceType::CUDA) cuda = true;
    else if (device_arg && device_arg->type() != c10::DeviceType::CPU) return c;
  } else if (!cuda && !any_cpu) {
    return c;
  }
  // Autocast re-calls the op with cast inputs: the nested call is the real one.
  if (cuda && op.autocast_cuda && eff.has(c10::DispatchKey::AutocastCUDA)) return c;
  if (!cuda && op.autocast_cpu && eff.has(c10::DispatchKey::AutocastCPU)) return c;
  c.key = cuda ? "CUDA" : "CPU";
  bool kernel = cuda ? op.kernel_cuda : op.kernel_cpu;
  if (!op.aten) {
    c.cls = kernel ? Cls::Foreign : Cls::Transparent;
    return c;
  }
  if (op.is_view || op.is_alloc) {
    c.cls = (kernel || op.composite_explicit) ? Cls::Ignorable : Cls::Transparent;
    return c;
  }
  if (kernel) c.cls = Cls::Kernel;
  else if (op.composite_explicit) c.cls = Cls::Composite;
  return c;
}

const char* kind_name(Cls cls, const OpInfo& op) {
  switch (cls) {
    case Cls::Kernel: return "kernel";
    case Cls::Composite: return "composite";
    case Cls::Foreign: return "foreign";
    case Cls::Ignorable: return op.is_alloc ? "alloc" : "view";
    default: return "";
  }
}

// Python numbers are part of an entry's identity, up to kNumberKeys values per
// signature: `x * 0.5` and `t * 0.044715` are two ops of MinGPT's GELU, and a
// chain (rules/capture/chains.h) must tell them apart. A number that changes
// every call (a schedule's step size) shares the plain signature's entry past
// that, so a loop does not make an entry per step.
constexpr size_t kNumberKeys = 8;

std::string entry_key_locked(State& st, const Described& d) {
  if (d.numbers.empty()) return d.signature;
  std::string keyed = d.signature + " numbers(" + d.numbers + ")";
  auto& keys = st.number_keys[d.signature];
  if (keys.count(keyed)) return keyed;
  if (keys.size() >= kNumberKeys) return d.signature;
  keys.insert(keyed);
  return keyed;
}

Entry* get_entry_locked(State& st, OpInfo* op, const std::string& kind, const std::string& key,
                        Described& d) {
  const std::string signature = entry_key_locked(st, d);
  auto it = st.entries.find(signature);
  if (it != st.entries.end()) return it->second.get();
  auto e = std::make_unique<Entry>();
  e->id = st.next_entry_id++;
  e->op = op;
  e->kind = kind;
  e->dispatch_key = key;
  e->signature = signature;
  e->args_json = std::move(d.args_json);
  Entry* raw = e.get();
  st.entries.emplace(signature, std::move(e));
  return raw;
}

void commit_call_locked(State& st, ThreadState& ts, Entry* e, int64_t ns, bool requires_grad) {
  e->calls++;
  e->modules[module_path()]++;
  e->wall_ns += ns;
  e->needs_grad |= requires_grad;
  e->outer[ts.outer]++;
  ts.backend_ns += ns;
  st.dirty = true;
}

void drop_open_tentatives(ThreadState& ts) {
  for (size_t i : ts.tentatives) ts.stack[i].dropped = true;
}

bool profiler_active() {
  try {
    return torch::profiler::impl::profilerEnabled();
  } catch (...) {
    return true;
  }
}

void device_begin(State& st, Frame& f) {
#if defined(FORGE_CAPTURE_CUPTI)
  std::call_once(st.timer_once, [&] {
    std::string why;
    st.timer = make_cupti_timer(&why);
    st.timer_status = st.timer ? "cupti" : "unavailable: " + why;
  });
  if (st.timer && f.entry) f.device_timed = st.timer->begin(f.entry->id, profiler_active());
#else
  (void)st;
  (void)f;
#endif
}

void device_end(State& st, Frame& f) {
  if (f.device_timed && st.timer) st.timer->end();
}

// Whether the entry still wants a sample (one more attempt counted); under st.mu.
bool claim_sample_locked(State& st, Entry* e) {
  if (e->sample_attempts >= st.cfg.samples) return false;
  e->sample_attempts++;
  return true;
}

// A sample the byte cap did not allow.
void note_sample_dropped(State& st, Entry* e) {
  std::lock_guard<std::mutex> lk(st.mu);
  e->samples_dropped++;
  st.samples_dropped++;
}

// Starts a frame for a classified backend candidate.
void start_backend(State& st, ThreadState& ts, Frame& f, const at::RecordFunction& fn, Cls cls,
                   const Classified& c) {
  auto inputs = fn.inputs();
  std::string kind = kind_name(cls, *f.op);
  bool ignorable = cls == Cls::Ignorable;
  bool foreign = cls == Cls::Foreign;
  Described d = describe(*f.op, inputs, !foreign);
  if (ignorable && !ts.tentatives.empty()) {
    // Part of the enclosing tentative op unless that one turns out to be composite.
    f.role = Role::IgnorablePending;
    f.x = std::make_unique<Extra>();
    f.x->d = std::move(d);
    f.x->kind = std::move(kind);
    f.x->key = c.key;
    ts.suppress++;
    return;
  }
  bool tentative = cls == Cls::Composite;
  bool want_sample = false;
  bool rg = d.requires_grad;
  {
    std::lock_guard<std::mutex> lk(st.mu);
    f.entry = get_entry_locked(st, f.op, kind, c.key, d);
    want_sample = !ignorable && !foreign && claim_sample_locked(st, f.entry);
  }
  if (tentative) {
    f.role = Role::Tentative;
    f.x = std::make_unique<Extra>();
    f.x->d.requires_grad = rg;
    ts.tentatives.push_back(ts.stack.size() - 1);
  } else {
    // A real kernel: every open tentative op above it is a decomposition.
    if (!ignorable) drop_open_tentatives(ts);
    f.role = Role::Backend;
    f.x = std::make_unique<Extra>();
    f.x->d.requires_grad = rg;
    ts.suppress++;
  }
  if (f.entry->kind != "view") f.x->flow_in = flow_inputs(inputs);  // a view is looked through (flows.h)
  if (want_sample) {
    if (in_graph_capture(inputs, c.any_cuda)) {
      std::lock_guard<std::mutex> lk(st.mu);
      st.samples_skipped_graph_capture++;
    } else {
      f.x->watched = watch_inputs(inputs);
      std::optional<Sample> s = take_sample(st, *f.op, inputs, /*snapshot=*/tentative);
      if (!s) {
        note_sample_dropped(st, f.entry);
      } else if (tentative) {
        f.x->sample = std::move(s);
      } else {
        f.x->committed = commit_sample(st, f.entry, *s);
      }
    }
  }
  if (std::strcmp(c.key, "CUDA") == 0) device_begin(st, f);
}

// What a classified op means for the implicit ops open around it: a kernel
// (or a composite or foreign op, which is one or holds one) makes them
// decompositions; an alloc is where one may put the output it computes.
void note_inside_implicits(ThreadState& ts, Cls cls, const OpInfo& op) {
  for (size_t i : ts.implicits) {
    if (cls == Cls::Ignorable) ts.stack[i].nested_alloc |= op.is_alloc;
    else ts.stack[i].nested_kernel = true;
  }
}

void start_impl(State& st, ThreadState& ts, const at::RecordFunction& fn, int64_t t_in) {
  ts.stack.emplace_back();
  Frame& f = ts.stack.back();
  f.rf = &fn;
  f.uncaught = std::uncaught_exceptions();
  f.t0 = t_in;
  f.ov0 = ts.overhead_ns;
  if (ts.suppress > 0) {
    // Inside a backend op: no lookup needed, only keep the stack balanced.
    f.role = Role::Suppressed;
    ts.op_depth++;
    return;
  }
  if (at::in_parallel_region()) return;  // intra-op worker: part of an op on another thread
  OpInfo* op = lookup(ts, fn);
  if (!op || op->skip) return;
  f.op = op;
  f.outermost = ts.op_depth == 0;
  ts.op_depth++;
  if (f.outermost) {
    ts.outer = op;
    ts.backend_ns = 0;
  }
  f.role = Role::Transparent;
  Classified c = classify(*op, fn.inputs());
  if (c.cls != Cls::Transparent) {
    note_inside_implicits(ts, c.cls, *op);
    start_backend(st, ts, f, fn, c.cls, c);
  } else if (op->aten && op->composite_implicit && !op->is_view && !op->is_alloc && op->write_args.empty() &&
             std::strcmp(c.key, "CPU") == 0) {
    f.implicit = true;
    f.x = std::make_unique<Extra>();
    f.x->held.assign(fn.inputs().begin(), fn.inputs().end());
    ts.implicits.push_back(ts.stack.size() - 1);
  }
  if (g_debug) {
    static const char* roles[] = {"skip", "suppressed", "transparent", "backend", "pending", "tentative"};
    std::fprintf(stderr, "forge-capture: %*s%s [%s%s%s]\n", 2 * (ts.op_depth - 1), "", op->qualified.c_str(),
                 roles[static_cast<int>(f.role)], *c.key ? " " : "", c.key);
  }
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  State* st = g_state.load(std::memory_order_acquire);
  if (!st) return nullptr;
  int64_t t_in = now_ns();
  ThreadState* ts = thread_state();
  if (!ts) return nullptr;
  size_t depth = ts->stack.size();
  try {
    start_impl(*st, *ts, fn, t_in);
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lk(st->mu);
    st->last_error = e.what();
  } catch (...) {
  }
  if (ts->stack.size() == depth) {  // an exception before the frame was pushed
    ts->stack.emplace_back();
    ts->stack.back().rf = &fn;
  }
  int64_t spent = now_ns() - t_in;
  ts->overhead_ns += spent;
  st->overhead_ns.fetch_add(spent, std::memory_order_relaxed);
  return nullptr;
}

// Describes the returns of an entry's first call (bytes written, output shapes).
// Valid only in the end callback, with needsOutputs(true).
thread_local const at::RecordFunction* t_ending = nullptr;  // set by on_end

void note_outputs_locked(Entry* e, const at::RecordFunction* rf) {
  // Frames unwound without their own end (async ranges) have no outputs to read.
  if (!e || !rf || rf != t_ending || !e->outputs_json.empty()) return;
  std::string sig, js = "[";
  bool requires_grad = false;
  const auto& outs = rf->outputs();
  for (size_t i = 0; i < outs.size(); ++i) {
    if (i) js += ',';
    describe_value(outs[i], ArgKind::Plain, sig, js, requires_grad);
  }
  e->outputs_json = js + "]";
}

// The call's data flow (flows.h), under st.mu; views are looked through. A
// failure costs the flow of this call, never the call's own record.
void note_flow_safe(State& st, Frame& f) {
  if (!f.entry || f.entry->kind == "view") return;
  try {
    note_flow_locked(st, f.entry, f.x->flow_in, *f.rf, true);
  } catch (...) {
  }
}

// Records which watched inputs the call changed (after its device work).
void note_changes(State& st, Frame& f) {
  if (!f.x || f.x->watched.empty()) return;
  std::vector<int> changed = changed_inputs(f.x->watched);
  f.x->watched.clear();
  if (changed.empty()) return;
  std::lock_guard<std::mutex> lk(st.mu);
  f.entry->changed.insert(changed.begin(), changed.end());
}

// An implicit op that allocated and ran no kernel inside it (CPU max_pool1d
// without autograd loops over the data itself): the backend op, recorded at
// its end like a leaf tentative, its sample taken from the inputs held since
// its start (it wrote only the output it allocated). Its nested allocs keep their own
// entries, as they do under any transparent op.
void commit_implicit_leaf(State& st, ThreadState& ts, Frame& f, int64_t ns) {
  if (!f.rf || f.rf != t_ending) return;  // unwound without its own end: no outputs to read
  drop_open_tentatives(ts);  // a composite open around it decomposes into it
  for (size_t i : ts.implicits) ts.stack[i].nested_kernel = true;  // and so does an implicit one
  const c10::ArrayRef<const c10::IValue> inputs(f.x->held.data(), f.x->held.size());
  Described d = describe(*f.op, inputs, true);
  bool want_sample = false;
  {
    std::lock_guard<std::mutex> lk(st.mu);
    f.entry = get_entry_locked(st, f.op, kind_name(Cls::Kernel, *f.op), "CPU", d);  // implicit frames are CPU calls
    want_sample = claim_sample_locked(st, f.entry);
  }
  if (want_sample) {
    std::optional<Sample> s = take_sample(st, *f.op, inputs, /*snapshot=*/false);
    if (s) commit_sample(st, f.entry, *s);
    else note_sample_dropped(st, f.entry);
  }
  f.x->flow_in = flow_inputs(inputs);
  std::lock_guard<std::mutex> lk(st.mu);
  note_outputs_locked(f.entry, f.rf);
  commit_call_locked(st, ts, f.entry, ns, d.requires_grad);
  note_flow_safe(st, f);
}

// A call that threw takes back the sample it took at its start (its inputs
// may be what made it throw: a bad index), files and bytes included, and
// gives its claim back so a later call of the entry is sampled instead; after
// kMaxRetracted such claims an entry keeps them (a loop of failing calls
// would otherwise write and remove a sample each time).
constexpr int kMaxRetracted = 4;
void retract_sample(State& st, Frame& f) {
  if (!f.x || !f.entry) return;
  const bool held = f.x->sample.has_value();  // Tentative: claimed, never committed
  if (!withdraw_sample(st, f.entry, f.x->committed) && !held) return;
  std::lock_guard<std::mutex> lk(st.mu);
  if (f.entry->samples_retracted < kMaxRetracted) {
    f.entry->samples_retracted++;
    f.entry->sample_attempts--;
  }
}

void end_impl(State& st, ThreadState& ts, Frame& f, int64_t t_in) {
  if (f.role == Role::Skip) return;
  ts.op_depth--;
  int64_t ns = t_in - f.t0 - (ts.overhead_ns - f.ov0);
  if (ns < 0) ns = 0;
  // A call that threw computed nothing a program reads: no call, time or
  // outputs of its own (its entry, made at its start, may stay at 0 calls:
  // report.cpp leaves such entries out).
  const bool threw = std::uncaught_exceptions() > f.uncaught;
  switch (f.role) {
    case Role::Suppressed:
      return;
    case Role::Transparent:
      if (f.implicit && !f.nested_kernel && f.nested_alloc && !threw) commit_implicit_leaf(st, ts, f, ns);
      break;
    case Role::Backend: {
      ts.suppress--;
      device_end(st, f);
      if (threw) {
        retract_sample(st, f);
        break;
      }
      note_changes(st, f);
      std::lock_guard<std::mutex> lk(st.mu);
      note_outputs_locked(f.entry, f.rf);
      commit_call_locked(st, ts, f.entry, ns, f.x && f.x->d.requires_grad);
      if (f.x && f.rf && f.rf == t_ending) note_flow_safe(st, f);
      break;
    }
    case Role::IgnorablePending: {
      ts.suppress--;
      if (!threw && !ts.tentatives.empty()) {
        Frame& t = ts.stack[ts.tentatives.back()];
        t.x->pending.push_back(PendingOp{f.op, std::move(f.x->kind), std::move(f.x->key),
                                         std::move(f.x->d), ns});
      }
      break;
    }
    case Role::Tentative: {
      ts.tentatives.pop_back();
      device_end(st, f);
      if (g_debug)
        std::fprintf(stderr, "forge-capture: %*s%s: %s\n", 2 * ts.op_depth, "", f.op->qualified.c_str(),
                     f.dropped ? "composite (nested backend op)" : "backend op (leaf)");
      if (threw) {
        retract_sample(st, f);
        break;
      }
      if (!f.dropped) {
        // No nested op reached a real kernel: this op is the backend op.
        drop_open_tentatives(ts);
        note_changes(st, f);
        if (f.x->sample) commit_sample(st, f.entry, *f.x->sample);
        std::lock_guard<std::mutex> lk(st.mu);
        note_outputs_locked(f.entry, f.rf);
        commit_call_locked(st, ts, f.entry, ns, f.x->d.requires_grad);
        if (f.rf && f.rf == t_ending) note_flow_safe(st, f);
      } else if (!f.x->pending.empty()) {
        // Composite after all: its nested views/allocs are backend ops of their own.
        std::lock_guard<std::mutex> lk(st.mu);
        for (PendingOp& p : f.x->pending) {
          Entry* e = get_entry_locked(st, p.op, p.kind, p.key, p.d);
          commit_call_locked(st, ts, e, p.ns, p.d.requires_grad);
        }
      }
      break;
    }
    default:
      break;
  }
  if (f.outermost) {
    if (!threw) {
      std::lock_guard<std::mutex> lk(st.mu);
      OuterStat& o = st.outer[f.op];
      o.calls++;
      o.ns += ns;
      o.backend_ns += ts.backend_ns;
      st.op_calls++;
      st.dirty = true;
    }
    ts.backend_ns = 0;
    ts.outer = nullptr;
  }
}

void on_end(const at::RecordFunction& fn, at::ObserverContext*) {
  State* st = g_state.load(std::memory_order_acquire);
  if (!st) return;
  int64_t t_in = now_ns();
  ThreadState* ts = thread_state();
  if (!ts || ts->stack.empty()) return;
  // Frames end in LIFO order; tolerate a mismatch (an async range) by unwinding
  // to the matching frame, or ignoring the end if there is none.
  size_t i = ts->stack.size();
  while (i > 0 && ts->stack[i - 1].rf != &fn) --i;
  if (i == 0) return;
  t_ending = &fn;
  while (ts->stack.size() >= i) {
    Frame f = std::move(ts->stack.back());
    ts->stack.pop_back();
    if (!ts->tentatives.empty() && ts->tentatives.back() >= ts->stack.size() &&
        f.role != Role::Tentative) {
      ts->tentatives.pop_back();  // defensive: keep indices valid
    }
    while (!ts->implicits.empty() && ts->implicits.back() >= ts->stack.size()) ts->implicits.pop_back();
    try {
      end_impl(*st, *ts, f, t_in);
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lk(st->mu);
      st->last_error = e.what();
    } catch (...) {
    }
  }
  int64_t spent = now_ns() - t_in;
  ts->overhead_ns += spent;
  st->overhead_ns.fetch_add(spent, std::memory_order_relaxed);
}

// ---------------------------------------------------------------------------
// Set-up

int64_t env_int(const char* name, int64_t dflt) {
  const char* v = std::getenv(name);
  if (!v || !*v) return dflt;
  char* end = nullptr;
  long long x = std::strtoll(v, &end, 10);
  if (end == v || *end != '\0' || x < 0) {
    std::fprintf(stderr, "forge: warning: ignoring %s=%s (not a non-negative integer)\n", name, v);
    return dflt;
  }
  return x;
}

State* new_state(const Config& cfg) {
  auto* st = new State;  // never freed: must outlive every late callback
  st->cfg = cfg;
  st->pid = static_cast<int>(::getpid());
  st->t_start_ns = now_ns();
  return st;
}

void fork_prepare() {
  if (State* st = g_state.load()) st->mu.lock();
}
void fork_parent() {
  if (State* st = g_state.load()) st->mu.unlock();
}
void fork_child() {
  // The child starts with empty tables: what the parent recorded is the parent's.
  State* old = g_state.load();
  if (!old) return;
  old->mu.unlock();
  g_state.store(new_state(old->cfg));  // the old state is leaked on purpose
  reset_flows();
}

struct Init {
  Init() {
    const char* dir = std::getenv("FORGE_CAPTURE_DIR");
    if (!dir || !*dir) return;
    try {
      Config cfg;
      cfg.dir = dir;
      while (cfg.dir.size() > 1 && cfg.dir.back() == '/') cfg.dir.pop_back();
      ::mkdir(cfg.dir.c_str(), 0755);
      cfg.samples = static_cast<int>(std::min<int64_t>(env_int("FORGE_CAPTURE_SAMPLES", 2), 1 << 20));
      cfg.max_bytes = env_int("FORGE_CAPTURE_MAX_BYTES", int64_t(1) << 30);
      g_debug = env_int("FORGE_CAPTURE_DEBUG", 0) != 0;
      g_state.store(new_state(cfg));
      g_callback = at::addGlobalCallback(at::RecordFunctionCallback(on_start, on_end)
                                             .needsInputs(true)
                                             .needsOutputs(true)
                                             .scopes({at::RecordScope::FUNCTION}));
      std::atexit(atexit_flush);
      pthread_atfork(fork_prepare, fork_parent, fork_child);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "forge: warning: capture disabled: %s\n", e.what());
    }
  }
};
Init g_init;

}  // namespace
}  // namespace forge::capture
