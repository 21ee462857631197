// Data flow between captured calls (flows.h).
#include "flows.h"

#include <c10/core/Storage.h>

#include <algorithm>
#include <map>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "json.h"

namespace forge::capture {
namespace {

// The last recorded call that returned a tensor of a storage, with a weak
// reference to that storage: a later reader of the storage (through any view)
// is its consumer only while it lives (a freed block whose StorageImpl address
// is reused by an unrecorded op is not).
struct Producer {
  uint64_t entry = 0;
  int out = 0;
  uint64_t call = 0;  // the producing call's number in the process (the trace's)
  c10::weak_intrusive_ptr<c10::StorageImpl> storage{c10::intrusive_ptr<c10::StorageImpl>()};
};

// All under st.mu (one State per process). Never freed, like the State: the
// report is written by an exit handler, after static objects are destroyed.
struct Flows {
  std::unordered_map<const void*, Producer> live;  // StorageImpl -> its last producer
  size_t prune_at = size_t(1) << 16;               // live's size that triggers dropping dead storages
  std::map<std::tuple<uint64_t, int, uint64_t, int>, uint64_t> edges;  // (from, out, to, in) -> calls
  std::map<std::pair<uint64_t, int>, uint64_t> produced;                // (entry, out) -> tensors
  // The trace: each read of a recorded call's output by a later call, call by
  // call, up to kTraceEdges reads. At that bound the calls whose outputs are
  // still alive are "open" (their later reads unknown) and tracing stops.
  struct Read {
    uint64_t from_call, from_entry;
    int out;
    uint64_t to_call, to_entry;
    int in;
  };
  uint64_t calls = 0;
  std::vector<Read> trace;
  std::vector<uint64_t> open;
  bool tracing = true;
};
constexpr size_t kTraceEdges = size_t(1) << 16;
Flows* g_flows = nullptr;
Flows& flows() {
  if (!g_flows) g_flows = new Flows;
  return *g_flows;
}

// The tensor's StorageImpl, or nullptr for tensors without one (sparse,
// nested, undefined, meta, tensor subclasses). Reads no data pointer (which
// would materialize a copy-on-write storage).
const c10::StorageImpl* storage_of(const at::Tensor& t) {
  if (!t.defined() || !t.has_storage() || t.is_meta() || t.numel() == 0) return nullptr;
  return t.storage().unsafeGetStorageImpl();
}

}  // namespace

std::vector<FlowInput> flow_inputs(c10::ArrayRef<c10::IValue> inputs) {
  std::vector<FlowInput> out;
  auto one = [&](int index, const at::Tensor& t) {
    if (const c10::StorageImpl* s = storage_of(t)) out.push_back(FlowInput{index, s});
  };
  for (size_t i = 0; i < inputs.size(); ++i) {
    const c10::IValue& v = inputs[i];
    if (v.isTensor()) {
      one(static_cast<int>(i), v.toTensor());
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorList()) one(static_cast<int>(i), t);
    } else if (v.isList()) {  // Tensor?[] (index's indices)
      for (const c10::IValue& e : v.toListRef())
        if (e.isTensor()) one(static_cast<int>(i), e.toTensor());
    }
  }
  return out;
}

void note_flow_locked(State&, Entry* e, const std::vector<FlowInput>& inputs, const at::RecordFunction& rf,
                      bool produces) {
  if (!e) return;
  Flows& f = flows();
  const uint64_t call = ++f.calls;
  for (const FlowInput& in : inputs) {
    auto it = f.live.find(in.storage);
    if (it == f.live.end()) continue;
    auto alive = it->second.storage.lock();
    if (!alive || alive.get() != in.storage) continue;
    f.edges[{it->second.entry, it->second.out, e->id, in.index}]++;
    if (f.tracing && f.trace.size() >= kTraceEdges) {
      f.tracing = false;
      for (const auto& [s, p] : f.live)
        if (!p.storage.expired()) f.open.push_back(p.call);
    }
    if (f.tracing) f.trace.push_back({it->second.call, it->second.entry, it->second.out, call, e->id, in.index});
  }
  if (!produces) return;
  const auto& outs = rf.outputs();
  for (size_t k = 0; k < outs.size(); ++k) {
    const c10::IValue& v = outs[k];
    if (!v.isTensor()) continue;
    const at::Tensor& t = v.toTensor();
    const c10::StorageImpl* s = storage_of(t);
    if (!s) continue;
    if (f.live.size() >= f.prune_at) {
      for (auto it = f.live.begin(); it != f.live.end();) it = it->second.storage.expired() ? f.live.erase(it) : ++it;
      f.prune_at = std::max(size_t(1) << 16, 2 * f.live.size());  // a scan per doubling, not per op
    }
    Producer p;
    p.entry = e->id;
    p.out = static_cast<int>(k);
    p.call = call;
    p.storage = t.storage().getWeakStorageImpl();
    f.live[s] = std::move(p);
    f.produced[{e->id, static_cast<int>(k)}]++;
  }
}

void write_flows_locked(const State&, std::string& js) {
  js += ",\n\"flows\":[";
  bool first = true;
  for (const auto& [k, n] : flows().edges) {
    js += first ? "\n" : ",\n";
    first = false;
    js += "{\"from\":";
    json::num(js, std::get<0>(k));
    js += ",\"out\":";
    json::num(js, static_cast<int64_t>(std::get<1>(k)));
    js += ",\"to\":";
    json::num(js, std::get<2>(k));
    js += ",\"in\":";
    json::num(js, static_cast<int64_t>(std::get<3>(k)));
    js += ",\"calls\":";
    json::num(js, n);
    js += '}';
  }
  js += "\n],\n\"produced\":[";
  first = true;
  for (const auto& [k, n] : flows().produced) {
    js += first ? "\n" : ",\n";
    first = false;
    js += "{\"entry\":";
    json::num(js, k.first);
    js += ",\"out\":";
    json::num(js, static_cast<int64_t>(k.second));
    js += ",\"tensors\":";
    json::num(js, n);
    js += '}';
  }
  js += "\n],\n\"trace\":{\"reads\":[";
  first = true;
  for (const auto& r : flows().trace) {
    js += first ? "\n[" : ",\n[";
    first = false;
    for (uint64_t v : {r.from_call, r.from_entry, static_cast<uint64_t>(r.out), r.to_call, r.to_entry,
                       static_cast<uint64_t>(r.in)}) {
      json::num(js, v);
      js += ',';
    }
    js.back() = ']';
  }
  js += "],\"truncated\":";
  js += flows().tracing ? "false" : "true";
  js += ",\"open\":[";
  first = true;
  for (uint64_t c : flows().open) {
    if (!first) js += ',';
    first = false;
    json::num(js, c);
  }
  js += "]}";
}

void reset_flows() { g_flows = new Flows; }  // the old tables are the parent's: leaked on purpose

}  // namespace forge::capture
