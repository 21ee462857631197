// The worker's comparison (compare.h): tolerances, the stock reference, and
// outputs against it.
#ifndef NDEBUG
#error "build with -DNDEBUG against the release wheel (docs/CAPTURE.md, the RecordFunction pitfall)"
#endif

#include "compare.h"

#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/stack.h>

#include <cfloat>

#include "op_args_detail.h"

namespace forge::worker {
namespace {

using detail::bad;
using detail::bits;
using detail::dtype_text;
using detail::fmt;

double value_at(const at::Tensor& flat, int64_t i) { return flat[i].item<double>(); }

// Elements compared at once: the float64 temporaries of a chunk take ~1 GB.
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
  for (const auto& v : args) {
    if (clone_inputs && v.isTensor() && v.toTensor().defined()) stack.emplace_back(v.toTensor().clone());
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
  // In chunks, so the float64 temporaries stay small whatever the output's
  // size; a violation is reported in the first chunk that has one.
  const at::Tensor out_flat = out.reshape(-1), ref_flat = ref.reshape(-1);
  const int64_t n = ref_flat.numel();
  for (int64_t c0 = 0; c0 < n; c0 += kCompareChunk) {
    const int64_t len = std::min(kCompareChunk, n - c0);
    at::Tensor o = out_flat.narrow(0, c0, len).to(at::kDouble);
    at::Tensor r = ref_flat.narrow(0, c0, len).to(at::kDouble);
    at::Tensor fo = o.isfinite(), fr = r.isfinite();
    at::Tensor both = fo & fr;
    at::Tensor same_special = (o.isnan() & r.isnan()) | o.eq(r);
    at::Tensor bad_special = both.logical_not() & same_special.logical_not();
    at::Tensor err = (o - r).abs().masked_fill(both.logical_not(), 0.0);
    at::Tensor rabs = r.abs();
    at::Tensor rel = (err / rabs.clamp_min(static_cast<double>(FLT_MIN))).masked_fill(both.logical_not(), 0.0);
    at::Tensor allowed = rabs * tol.rtol + tol.atol;
    at::Tensor excess = err - allowed;
    // Every figure in one device-to-host copy: on CUDA each read is a synchronize.
    std::vector<at::Tensor> parts = {bad_special.any().to(at::kDouble), err.max(), rel.max(), excess.max()};
    const bool has_tol = tol.atol > 0 || tol.rtol > 0;
    if (has_tol) parts.push_back((err / allowed).masked_fill(allowed.eq(0), 0.0).max());
    at::Tensor summary = at::stack(parts).cpu();
    const double* f = summary.data_ptr<double>();
    if (f[0] != 0) {
      int64_t i = bad_special.nonzero().select(1, 0).min().item<int64_t>();
      return Mismatch{"nan_mismatch", prefix + "got " + fmt(value_at(o, i)) + ", expected " + fmt(value_at(r, i)) +
                                          " at index " + index_text(ref.sizes(), c0 + i) + " " + where +
                                          " (NaN and inf must match the stock kernel exactly)"};
    }
    stats.worst_abs = std::max(stats.worst_abs, f[1]);
    stats.worst_rel = std::max(stats.worst_rel, f[2]);
    if (has_tol) stats.worst_tol = std::max(stats.worst_tol, f[4]);
    if (!(f[3] > 0)) continue;
    // Report the element furthest outside its tolerance.
    int64_t i = excess.argmax().item<int64_t>();
    return Mismatch{"wrong_result", prefix + "max abs err " + fmt(value_at(err, i)) + " (rel " +
                                        fmt(value_at(rel, i)) + ") at index " + index_text(ref.sizes(), c0 + i) +
                                        " " + where + ": got " + fmt(value_at(o, i), 9) + ", expected " +
                                        fmt(value_at(r, i), 9) + " (atol " + fmt(tol.atol) + ", rtol " +
                                        fmt(tol.rtol) + ")"};
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
