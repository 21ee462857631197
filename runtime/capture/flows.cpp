// Data flow between captured calls (flows.h).
#include "flows.h"

#include <c10/core/Storage.h>

#include <map>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "json.h"

namespace forge::capture {
namespace {

// The last recorded writer of a data pointer, with a weak reference to the
// storage it wrote: a later reader at that address is its consumer only while
// that storage lives (a freed block reused by an unrecorded op is not).
struct Producer {
  uint64_t entry = 0;
  int out = 0;
  c10::weak_intrusive_ptr<c10::StorageImpl> storage{c10::intrusive_ptr<c10::StorageImpl>()};
  int64_t numel = 0;
};

// All under st.mu (one State per process). Never freed, like the State: the
// report is written by an exit handler, after static objects are destroyed.
struct Flows {
  std::unordered_map<const void*, Producer> live;
  std::map<std::tuple<uint64_t, int, uint64_t, int>, uint64_t> edges;  // (from, out, to, in) -> calls
  std::map<std::pair<uint64_t, int>, uint64_t> produced;                // (entry, out) -> tensors
};
Flows* g_flows = nullptr;
Flows& flows() {
  if (!g_flows) g_flows = new Flows;
  return *g_flows;
}

// Past this many live addresses, those whose storage died are dropped.
constexpr size_t kLivePrune = size_t(1) << 16;

bool usable(const at::Tensor& t) {
  return t.defined() && t.has_storage() && t.numel() > 0 && t.data_ptr() != nullptr;
}

}  // namespace

std::vector<FlowInput> flow_inputs(c10::ArrayRef<c10::IValue> inputs) {
  std::vector<FlowInput> out;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const c10::IValue& v = inputs[i];
    if (!v.isTensor()) continue;
    const at::Tensor& t = v.toTensor();
    if (!usable(t)) continue;
    out.push_back(FlowInput{static_cast<int>(i), t.data_ptr(), t.numel(), t.storage().unsafeGetStorageImpl()});
  }
  return out;
}

void note_flow_locked(State&, Entry* e, const std::vector<FlowInput>& inputs, const at::RecordFunction& rf) {
  if (!e) return;
  auto& g_live = flows().live;
  for (const FlowInput& in : inputs) {
    auto it = g_live.find(in.data);
    if (it == g_live.end() || it->second.numel != in.numel) continue;
    auto alive = it->second.storage.lock();
    if (!alive || alive.get() != in.storage) continue;
    flows().edges[{it->second.entry, it->second.out, e->id, in.index}]++;
  }
  const auto& outs = rf.outputs();
  for (size_t k = 0; k < outs.size(); ++k) {
    const c10::IValue& v = outs[k];
    if (!v.isTensor()) continue;
    const at::Tensor& t = v.toTensor();
    if (!usable(t)) continue;
    if (g_live.size() >= kLivePrune)
      for (auto it = g_live.begin(); it != g_live.end();) it = it->second.storage.expired() ? g_live.erase(it) : ++it;
    Producer p;
    p.entry = e->id;
    p.out = static_cast<int>(k);
    p.storage = t.storage().getWeakStorageImpl();
    p.numel = t.numel();
    g_live[t.data_ptr()] = std::move(p);
    flows().produced[{e->id, static_cast<int>(k)}]++;
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
  js += "\n]";
}

void reset_flows() { g_flows = new Flows; }  // the old tables are the parent's: leaked on purpose

}  // namespace forge::capture
