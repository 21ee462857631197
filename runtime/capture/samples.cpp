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

#include <unistd.h>

#include <algorithm>
#include <mutex>

#include "../common/sample_part.h"
#include "json.h"
#include "report.h"

namespace forge::capture {
namespace {

// Elements of t a sample stores (sample_part.h): all, or its leading blocks.
int64_t stored_numel(const State& st, const at::Tensor& t) {
  const int64_t limit = sample_part::tensor_limit_bytes(st.cfg.max_bytes) / static_cast<int64_t>(t.element_size());
  return sample_part::stored_numel(t.sizes(), limit);
}

// The bytes a sample of v writes.
int64_t estimate_bytes(const State& st, const c10::IValue& v) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    return t.defined() ? stored_numel(st, t) * static_cast<int64_t>(t.element_size()) : 0;
  }
  int64_t n = 0;
  if (v.isTensorList()) {
    auto l = v.toTensorList();
    for (size_t i = 0; i < l.size(); ++i) n += estimate_bytes(st, c10::IValue(l.get(i)));
  } else if (v.isList()) {
    auto l = v.toList();
    for (size_t i = 0; i < l.size(); ++i) n += estimate_bytes(st, l.get(i));
  }
  return n;
}

// The leading `count` elements of t in row-major order, as a view: index 0 on
// the outer dims, the first count / inner slices of the next one, where inner
// (the trailing dims' product) divides count as stored_numel makes it.
at::Tensor leading_view(const at::Tensor& t, int64_t count) {
  if (count >= t.numel()) return t;
  int64_t inner = 1;
  int64_t d = t.dim();
  while (d > 0 && inner * t.size(d - 1) <= count) inner *= t.size(--d);
  // Here inner * size(d - 1) > count: keep dims d - 1.. of element 0 of the rest.
  at::Tensor v = t;
  for (int64_t k = 0; k + 1 < d; ++k) v = v.select(0, 0);
  return v.narrow(0, 0, count / inner);
}

bool is_integer(const at::Tensor& t) {
  return !at::isFloatingType(t.scalar_type()) && !at::isComplexType(t.scalar_type()) &&
         t.scalar_type() != c10::ScalarType::Bool;
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
    const int64_t numel = t.numel(), count = stored_numel(st, t);
    at::Tensor c = leading_view(t.detach(), count);
    if (c.is_conj()) c = c.resolve_conj();
    if (c.is_neg()) c = c.resolve_neg();
    c = c.to(at::kCPU).contiguous();
    if (snapshot && c.is_alias_of(t)) c = c.clone();
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
    if (count < numel) {
      // A partial sample: the scheme, the elements stored and, for integers,
      // the whole tensor's range (where indices must stay valid).
      s.json += ",\"sampling\":";
      json::str(s.json, sample_part::kScheme);
      s.json += ",\"stored_numel\":";
      json::num(s.json, count);
      if (is_integer(t)) {
        // On the tensor's device, before anything is copied.
        auto [lo, hi] = t.detach().aminmax();
        s.json += ",\"min\":";
        json::num(s.json, lo.item<int64_t>());
        s.json += ",\"max\":";
        json::num(s.json, hi.item<int64_t>());
      }
    }
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
  for (const auto& v : inputs) est += estimate_bytes(st, v);
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
Committed commit_sample(State& st, Entry* e, Sample& s) {
  Committed c;
  int64_t before = st.sample_bytes.fetch_add(s.bytes);
  bool ok = before + s.bytes <= st.cfg.max_bytes;
  if (ok) {
    for (auto& [path, t] : s.files) {
      if (!write_file(path, t.data_ptr(), static_cast<size_t>(t.numel()) * t.element_size())) {
        ok = false;
        break;
      }
      st.sample_files++;
      c.files.push_back(path);
    }
  }
  if (!ok) st.sample_bytes.fetch_sub(s.bytes);
  std::lock_guard<std::mutex> lk(st.mu);
  if (ok) {
    c.json = s.json;
    c.bytes = s.bytes;
    e->samples.push_back(std::move(s.json));
  } else {
    e->samples_dropped++;
    st.samples_dropped++;
  }
  st.dirty = true;
  return c;
}

bool withdraw_sample(State& st, Entry* e, const Committed& c) {
  if (c.json.empty()) return false;
  {
    std::lock_guard<std::mutex> lk(st.mu);
    auto& v = e->samples;
    auto it = std::find(v.begin(), v.end(), c.json);
    if (it == v.end()) return false;
    v.erase(it);
    st.dirty = true;
  }
  st.sample_bytes.fetch_sub(c.bytes);
  for (const auto& path : c.files)
    if (::unlink(path.c_str()) == 0) st.sample_files--;
  return true;
}

}  // namespace forge::capture
