// Watching a call's inputs for changes (changes.h).
#ifndef NDEBUG
#error "build with -DNDEBUG: RecordFunction's layout depends on it (see docs/CAPTURE.md)"
#endif

#include "changes.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <ATen/record_function.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

namespace forge::capture {
namespace {

// The same bits as an integer tensor of the element's width (NaN == NaN, and
// -0.0 != 0.0); nullopt for widths with no integer type (complex128).
std::optional<at::Tensor> as_bits(const at::Tensor& t) {
  switch (t.element_size()) {
    case 1: return t.view(at::kByte);
    case 2: return t.view(at::kShort);
    case 4: return t.view(at::kInt);
    case 8: return t.view(at::kLong);
    default: return std::nullopt;
  }
}

}  // namespace

std::vector<Watched> watch_inputs(c10::ArrayRef<const c10::IValue> inputs) {
  at::DisableRecordFunctionGuard no_record;
  at::NoGradGuard no_grad;
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
  std::vector<Watched> out;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].isTensor()) continue;
    const at::Tensor& t = inputs[i].toTensor();
    if (!t.defined() || t.is_sparse() || t.is_quantized() || t.is_meta()) continue;
    if (static_cast<int64_t>(t.numel()) * static_cast<int64_t>(t.element_size()) > kWatchBytes) continue;
    at::Tensor d = t.detach();
    out.push_back({static_cast<int>(i), d, d.clone()});
  }
  return out;
}

std::vector<int> changed_inputs(const std::vector<Watched>& watched) {
  at::DisableRecordFunctionGuard no_record;
  at::NoGradGuard no_grad;
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
  std::vector<int> changed;
  for (const Watched& w : watched) {
    if (w.live.sizes() != w.before.sizes() || w.live.scalar_type() != w.before.scalar_type()) {
      changed.push_back(w.arg);
      continue;
    }
    if (w.live.numel() == 0) continue;
    auto a = as_bits(w.live), b = as_bits(w.before);
    if (!a || !b) continue;
    if (a->ne(*b).any().item<bool>()) changed.push_back(w.arg);
  }
  return changed;
}

}  // namespace forge::capture
