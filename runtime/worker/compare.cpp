// The worker's comparison (compare.h): tolerances, the stock reference, and
// outputs against it.
#ifndef NDEBUG
#error "build with -DNDEBUG against the release wheel (docs/CAPTURE.md, the RecordFunction pitfall)"
#endif

#include "compare.h"

#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/stack.h>

#include <cfloat>
#include <cmath>

#include "op_args_detail.h"

namespace forge::worker {
namespace {

using detail::bad;
using detail::bits;
using detail::dtype_text;
using detail::fmt;

double value_at(const at::Tensor& flat, int64_t i) { return flat[i].item<double>(); }

// Elements compared per host pass: two float64 chunks of 128 MiB.
constexpr int64_t kCompareChunk = int64_t(1) << 24;

}  // namespace

Tolerance tolerance_for(const Family& family, c10::ScalarType out, std::optional<c10::ScalarType> in) {
  const std::optional<std::string> in_name = in ? std::optional<std::string>(dtype_text(*in)) : std::nullopt;
  return tolerance_for(family, dtype_text(out), at::isFloatingType(out),
                       in_name ? std::optional<std::string_view>(*in_name) : std::nullopt);
}

std::vector<at::Tensor> call_stock(const OpSpec& spec, const std::vector<c10::IValue>& args, bool clone_inputs) {
  torch::jit::Stack stack;
  stack.reserve(args.size());
  std::vector<at::Tensor> used(args.size());  // the tensors the call got (changed inputs: their new values)
  for (size_t i = 0; i < args.size(); ++i) {
    const c10::IValue& v = args[i];
    if (v.isTensor() && v.toTensor().defined()) used[i] = clone_inputs ? v.toTensor().clone() : v.toTensor();
    if (used[i].defined()) stack.emplace_back(used[i]);
    else stack.push_back(v);
  }
  {
    // Below autograd: the backend kernel (CPU or CUDA) of the stock library, or
    // the composite it decomposes into, exactly what the backend dispatch key
    // sees in the user's program. No autograd graph is recorded.
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    spec.op->callBoxed(&stack);
  }
  std::vector<at::Tensor> outs;
  for (auto& v : stack) {
    if (v.isTensor()) {
      outs.push_back(v.toTensor());
    } else if (v.isNone()) {
      outs.emplace_back();
    } else {
      bad(spec.name + " returns a " + v.tagKind() + ", which the candidate ABI cannot express");
    }
  }
  for (int i : spec.extra_outputs) outs.push_back(used[static_cast<size_t>(i)]);
  return outs;
}

std::optional<Mismatch> compare_to_reference(const at::Tensor& out, const at::Tensor& ref, Tolerance tol,
                                             const std::string& label, const std::string& where,
                                             CompareStats& stats) {
  if (!ref.defined()) return std::nullopt;
  if (ref.numel() == 0) return std::nullopt;
  const std::string prefix = label.empty() ? std::string() : label + ": ";
  if (!at::isFloatingType(ref.scalar_type())) {
    at::Tensor ne = bits(out).ne(bits(ref)).reshape(-1);
    if (!ne.any().item<bool>()) return std::nullopt;
    int64_t i = ne.nonzero().select(1, 0).min().item<int64_t>();
    at::Tensor o = out.reshape(-1).to(at::kDouble), r = ref.reshape(-1).to(at::kDouble);
    return Mismatch{"wrong_result", prefix + "got " + fmt(value_at(o, i)) + ", expected " + fmt(value_at(r, i)) +
                                        " at index " + index_text(ref.sizes(), i) + " " + where +
                                        " (exact match required)"};
  }
  // On the host in float64, one chunk at a time: one pass per element, the
  // figures and the verdict together (a device output costs one copy per
  // chunk instead of a dozen kernels and their synchronizations).
  const at::Tensor out_flat = out.detach().reshape(-1), ref_flat = ref.detach().reshape(-1);
  const int64_t n = ref_flat.numel();
  const bool has_tol = tol.atol > 0 || tol.rtol > 0;
  for (int64_t c0 = 0; c0 < n; c0 += kCompareChunk) {
    const int64_t len = std::min(kCompareChunk, n - c0);
    auto host = [&](const at::Tensor& t) { return t.narrow(0, c0, len).to(at::kCPU).to(at::kDouble).contiguous(); };
    const at::Tensor oh = host(out_flat), rh = host(ref_flat);
    const double* o = oh.data_ptr<double>();
    const double* r = rh.data_ptr<double>();
    double worst_abs = 0, worst_rel = 0, worst_tol = 0, worst_excess = 0;
    int64_t bad = -1;  // the element furthest outside its tolerance
    for (int64_t i = 0; i < len; ++i) {
      const double a = o[i], b = r[i];
      if (!std::isfinite(a) || !std::isfinite(b)) {
        if ((std::isnan(a) && std::isnan(b)) || a == b) continue;
        return Mismatch{"nan_mismatch", prefix + "got " + fmt(a) + ", expected " + fmt(b) + " at index " +
                                            index_text(ref.sizes(), c0 + i) + " " + where +
                                            " (NaN and inf must match the stock kernel exactly)"};
      }
      const double err = std::fabs(a - b), rabs = std::fabs(b);
      const double allowed = rabs * tol.rtol + tol.atol;
      worst_abs = std::max(worst_abs, err);
      worst_rel = std::max(worst_rel, err / std::max(rabs, static_cast<double>(FLT_MIN)));
      if (has_tol && allowed != 0) worst_tol = std::max(worst_tol, err / allowed);
      if (err - allowed > worst_excess) worst_excess = err - allowed, bad = i;
    }
    stats.worst_abs = std::max(stats.worst_abs, worst_abs);
    stats.worst_rel = std::max(stats.worst_rel, worst_rel);
    if (has_tol) stats.worst_tol = std::max(stats.worst_tol, worst_tol);
    if (bad < 0) continue;
    const double err = std::fabs(o[bad] - r[bad]);
    return Mismatch{"wrong_result", prefix + "max abs err " + fmt(err) + " (rel " +
                                        fmt(err / std::max(std::fabs(r[bad]), static_cast<double>(FLT_MIN))) +
                                        ") at index " + index_text(ref.sizes(), c0 + bad) + " " + where +
                                        ": got " + fmt(o[bad], 9) + ", expected " + fmt(r[bad], 9) + " (atol " +
                                        fmt(tol.atol) + ", rtol " + fmt(tol.rtol) + ")"};
  }
  return std::nullopt;
}

std::optional<std::string> first_bit_difference(const at::Tensor& a, const at::Tensor& b) {
  if (!a.defined() || a.numel() == 0) return std::nullopt;
  at::Tensor ne = bits(a).ne(bits(b)).reshape(-1);
  if (!ne.any().item<bool>()) return std::nullopt;
  int64_t i = ne.nonzero().select(1, 0).min().item<int64_t>();
  at::Tensor x = a.reshape(-1).to(at::kDouble), y = b.reshape(-1).to(at::kDouble);
  return index_text(a.sizes(), i) + " (" + fmt(value_at(x, i), 9) + " vs " + fmt(value_at(y, i), 9) + ")";
}

}  // namespace forge::worker
