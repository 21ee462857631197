// The capture's samples (samples.h): copying a call's inputs to host memory
// and writing them within the byte cap.
#ifndef NDEBUG
#error "build with -DNDEBUG: RecordFunction's layout depends on it (see docs/CAPTURE.md)"
#endif

#include "samples.h"

#include <ATen/core/grad_mode.h>
#include <ATen/record_function.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#if defined(FORGE_CAPTURE_CUDA)
#include <c10/cuda/CUDAGraphsC10Utils.h>
#endif

#include <mutex>

#include "json.h"
#include "report.h"

namespace forge::capture {
namespace {

int64_t estimate_bytes(const c10::IValue& v) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    return t.defined() ? static_cast<int64_t>(t.numel()) * static_cast<int64_t>(t.element_size()) : 0;
  }
  int64_t n = 0;
  if (v.isTensorList()) {
    auto l = v.toTensorList();
    for (size_t i = 0; i < l.size(); ++i) n += estimate_bytes(c10::IValue(l.get(i)));
  } else if (v.isList()) {
    auto l = v.toList();
    for (size_t i = 0; i < l.size(); ++i) n += estimate_bytes(l.get(i));
  }
  return n;
}

bool has_tensor(const c10::IValue& v) {
  if (v.isTensor()) return v.toTensor().defined();
  if (v.isTensorList()) return v.toTensorList().size() > 0;
  if (v.isList()) {
    auto l = v.toList();
    for (size_t i = 0; i < l.size(); ++i)
      if (has_tensor(l.get(i))) return true;
  }
  return false;
}

// Appends a sample JSON value for v, copying tensors. `snapshot`: the copy must
// not share memory with the input (it is written later, after the op ran).
void sample_value(State& st, const c10::IValue& v, ArgKind kind, bool snapshot, Sample& s) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (!t.defined()) {
      s.json += "null";
      return;
    }
    at::Tensor c = t.detach();
    if (c.is_conj()) c = c.resolve_conj();
    if (c.is_neg()) c = c.resolve_neg();
    c = c.to(at::kCPU).contiguous();
    if (snapshot && c.data_ptr() == t.data_ptr()) c = c.clone();
    int64_t nbytes = static_cast<int64_t>(c.numel()) * static_cast<int64_t>(c.element_size());
    std::string file = std::to_string(st.pid) + "-" + std::to_string(st.next_sample++) + ".bin";
    s.json += "{\"type\":\"Tensor\",\"file\":";
    json::str(s.json, file);
    s.json += ',';
    tensor_meta_json(s.json, t);
    s.json += ",\"storage_offset\":";
    json::num(s.json, static_cast<int64_t>(t.storage_offset()));
    s.json += ",\"nbytes\":";
    json::num(s.json, nbytes);
    s.json += '}';
    s.files.emplace_back(st.cfg.dir + "/" + file, std::move(c));
    s.bytes += nbytes;
    return;
  }
  if (has_tensor(v) && (v.isTensorList() || v.isList())) {
    std::vector<c10::IValue> items;
    const char* type = v.isTensorList() ? "Tensor[]" : "list";
    if (v.isTensorList()) {
      auto l = v.toTensorList();
      for (size_t i = 0; i < l.size(); ++i) items.emplace_back(l.get(i));
    } else {
      auto l = v.toList();
      for (size_t i = 0; i < l.size(); ++i) items.emplace_back(l.get(i));
    }
    s.json += "{\"type\":\"";
    s.json += type;
    s.json += "\",\"value\":[";
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) s.json += ',';
      sample_value(st, items[i], ArgKind::Plain, snapshot, s);
    }
    s.json += "]}";
    return;
  }
  std::string sig;
  bool rg = false;
  describe_value(v, kind, sig, s.json, rg);
}

}  // namespace

bool in_graph_capture(c10::ArrayRef<const c10::IValue> inputs, bool any_cuda) {
#if defined(FORGE_CAPTURE_CUDA)
  if (any_cuda) {
    return c10::cuda::currentStreamCaptureStatusMayInitCtx() != c10::cuda::CaptureStatus::None;
  }
#endif
  return false;
}

// Copies the call's inputs. Returns nullopt when the byte cap does not allow it.
std::optional<Sample> take_sample(State& st, const OpInfo& op, c10::ArrayRef<const c10::IValue> inputs,
                                  bool snapshot) {
  int64_t est = 0;
  for (const auto& v : inputs) est += estimate_bytes(v);
  if (st.sample_bytes.load() + est > st.cfg.max_bytes) return std::nullopt;
  at::DisableRecordFunctionGuard no_record;
  at::NoGradGuard no_grad;
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
  Sample s;
  s.json = "{\"inputs\":[";
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (i) s.json += ',';
    sample_value(st, inputs[i], i < op.arg_kinds.size() ? op.arg_kinds[i] : ArgKind::Plain, snapshot, s);
  }
  s.json += "]}";
  return s;
}

// Writes the sample's files (within the byte cap) and records it on the entry.
void commit_sample(State& st, Entry* e, Sample& s) {
  int64_t before = st.sample_bytes.fetch_add(s.bytes);
  bool ok = before + s.bytes <= st.cfg.max_bytes;
  if (ok) {
    for (auto& [path, t] : s.files) {
      if (!write_file(path, t.data_ptr(), static_cast<size_t>(t.numel()) * t.element_size())) {
        ok = false;
        break;
      }
      st.sample_files++;
    }
  }
  if (!ok) st.sample_bytes.fetch_sub(s.bytes);
  std::lock_guard<std::mutex> lk(st.mu);
  if (ok) {
    e->samples.push_back(std::move(s.json));
  } else {
    e->samples_dropped++;
    st.samples_dropped++;
  }
  st.dirty = true;
}

}  // namespace forge::capture
