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
// Elements per device scan: about nine float64 temporaries of 32 MiB each,
// inside the memory plan's slack (memory_plan.h).
constexpr int64_t kDeviceCompareChunk = int64_t(1) << 22;

// One pass over a chunk: the figures compare_to_reference reports, the largest
// excess over the tolerance (> 0: some element fails), and whether either side
// holds a NaN or an inf. Exact for a clean chunk; otherwise only "not clean"
// is used, and compare_elements decides.
struct ChunkScan {
  double worst_abs = 0, worst_rel = 0, worst_tol = 0, excess = 0;
  bool nonfinite = false;
  bool clean() const { return !nonfinite && !(excess > 0); }
};

// Branch-free, so the compiler vectorizes it; non-finite values only set the
// flag (their NaN figures lose every comparison below).
template <class T>
ChunkScan scan_values(const T* o, const T* r, int64_t len, Tolerance tol) {
  double wa = 0, wr = 0, wt = 0, ex = 0;
  int nonfinite = 0;
  const double atol = tol.atol, rtol = tol.rtol, tiny = static_cast<double>(FLT_MIN);
  for (int64_t i = 0; i < len; ++i) {
    const double a = static_cast<double>(o[i]), b = static_cast<double>(r[i]);
    nonfinite |= static_cast<int>(!(a - a == 0)) | static_cast<int>(!(b - b == 0));  // x - x: NaN for NaN and inf
    const double err = std::fabs(a - b), rabs = std::fabs(b);
    const double allowed = rabs * rtol + atol;
    const double rel = err / (rabs > tiny ? rabs : tiny);
    const double t = allowed != 0 ? err / (allowed != 0 ? allowed : 1.0) : 0.0;
    const double e = err - allowed;
    wa = err > wa ? err : wa;
    wr = rel > wr ? rel : wr;
    wt = t > wt ? t : wt;
    ex = e > ex ? e : ex;
  }
  return ChunkScan{wa, wr, wt, ex, nonfinite != 0};
}

ChunkScan scan_on_host(const at::Tensor& out, const at::Tensor& ref, Tolerance tol) {
  // float32 and float64 as they are; the 16-bit formats widen exactly to float32.
  auto as = [](const at::Tensor& t, c10::ScalarType st) { return t.to(at::kCPU).to(st).contiguous(); };
  const c10::ScalarType st = out.scalar_type() == at::kDouble || ref.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  const at::Tensor o = as(out, st), r = as(ref, st);
  if (st == at::kDouble) return scan_values(o.data_ptr<double>(), r.data_ptr<double>(), o.numel(), tol);
  return scan_values(o.data_ptr<float>(), r.data_ptr<float>(), o.numel(), tol);
}

// The same figures with tensor ops where the chunk lives, copied back at once.
ChunkScan scan_with_ops(const at::Tensor& out, const at::Tensor& ref, Tolerance tol) {
  const at::Tensor o = out.to(at::kDouble), r = ref.to(at::kDouble);
  const at::Tensor nonfinite = at::logical_or(o.isfinite().logical_not(), r.isfinite().logical_not()).any();
  const at::Tensor err = (o - r).abs_();
  const at::Tensor rabs = r.abs();
  const at::Tensor allowed = rabs * tol.rtol + tol.atol;
  const at::Tensor ratio = at::where(allowed.ne(0), err / allowed, at::zeros({}, err.options()));
  const at::Tensor figures =
      at::stack({err.amax(), (err / rabs.clamp_min(static_cast<double>(FLT_MIN))).amax(), ratio.amax(),
                 (err - allowed).amax(), nonfinite.to(at::kDouble)})
          .cpu();
  const double* f = figures.data_ptr<double>();
  return ChunkScan{f[0], f[1], f[2], f[3], f[4] != 0};
}

// The element-by-element comparison of one chunk (first index c0 of a tensor
// of `sizes`) on the host in float64: the first non-finite mismatch, else the
// element furthest outside its tolerance; updates stats when it passes.
// ref64 (undefined: none): the float64 evaluation's chunk, the second chance
// of an element outside the tolerance of ref (compare_to_reference).
// slack64: added to the second chance's allowance (compare_to_reference).
std::optional<Mismatch> compare_elements(const at::Tensor& out, const at::Tensor& ref, const at::Tensor& ref64,
                                         double slack64, int64_t c0, at::IntArrayRef sizes, Tolerance tol,
                                         const std::string& prefix, const std::string& where, CompareStats& stats) {
  auto host = [](const at::Tensor& t) { return t.to(at::kCPU).to(at::kDouble).contiguous(); };
  const at::Tensor oh = host(out), rh = host(ref);
  const at::Tensor r64h = ref64.defined() ? host(ref64) : at::Tensor();
  const double* o = oh.data_ptr<double>();
  const double* r = rh.data_ptr<double>();
  const double* r64 = r64h.defined() ? r64h.data_ptr<double>() : nullptr;
  const int64_t len = rh.numel();
  const bool has_tol = tol.atol > 0 || tol.rtol > 0;
  double worst_abs = 0, worst_rel = 0, worst_tol = 0, worst_excess = 0;
  int64_t bad = -1;  // the element furthest outside its tolerance
  for (int64_t i = 0; i < len; ++i) {
    const double a = o[i], b = r[i];
    if (!std::isfinite(a) || !std::isfinite(b)) {
      if ((std::isnan(a) && std::isnan(b)) || a == b) continue;
      return Mismatch{"nan_mismatch", prefix + "got " + fmt(a) + ", expected " + fmt(b) + " at index " +
                                          index_text(sizes, c0 + i) + " " + where +
                                          " (NaN and inf must match the stock kernel exactly)"};
    }
    double err = std::fabs(a - b), rabs = std::fabs(b);
    double allowed = rabs * tol.rtol + tol.atol;
    if (err > allowed && r64 && std::isfinite(r64[i])) {
      const double err64 = std::fabs(a - r64[i]), allowed64 = std::fabs(r64[i]) * tol.rtol + tol.atol + slack64;
      if (err64 <= allowed64) err = err64, rabs = std::fabs(r64[i]), allowed = allowed64;
    }
    worst_abs = std::max(worst_abs, err);
    worst_rel = std::max(worst_rel, err / std::max(rabs, static_cast<double>(FLT_MIN)));
    if (has_tol && allowed != 0) worst_tol = std::max(worst_tol, err / allowed);
    if (err - allowed > worst_excess) worst_excess = err - allowed, bad = i;
  }
  stats.worst_abs = std::max(stats.worst_abs, worst_abs);
  stats.worst_rel = std::max(stats.worst_rel, worst_rel);
  if (has_tol) stats.worst_tol = std::max(stats.worst_tol, worst_tol);
  if (bad < 0) return std::nullopt;
  const double err = std::fabs(o[bad] - r[bad]);
  return Mismatch{"wrong_result", prefix + "max abs err " + fmt(err) + " (rel " +
                                      fmt(err / std::max(std::fabs(r[bad]), static_cast<double>(FLT_MIN))) +
                                      ") at index " + index_text(sizes, c0 + bad) + " " + where + ": got " +
                                      fmt(o[bad], 9) + ", expected " + fmt(r[bad], 9) + " (atol " + fmt(tol.atol) +
                                      ", rtol " + fmt(tol.rtol) + ")" +
                                      (r64 ? "; float64 gives " + fmt(r64[bad], 9) + ", outside them widened by " +
                                                 fmt(slack64) + " (stock's own error allowance) too"
                                           : "")};
}

}  // namespace

double stock_error64(const at::Tensor& stock, const at::Tensor& ref64) {
  const at::Tensor ref_flat = stock.detach().reshape(-1), ref64_flat = ref64.detach().reshape(-1);
  double worst = 0;
  const int64_t n = ref_flat.numel();
  for (int64_t c0 = 0; c0 < n; c0 += kDeviceCompareChunk) {
    const int64_t len = std::min(kDeviceCompareChunk, n - c0);
    const at::Tensor d = (ref_flat.narrow(0, c0, len).to(at::kDouble) -
                          ref64_flat.narrow(0, c0, len).to(ref_flat.device(), at::kDouble))
                             .abs();
    worst = std::max(worst, at::nan_to_num(d, 0.0, 0.0, 0.0).max().item<double>());
  }
  return worst;
}

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
                                             CompareStats& stats, const std::function<at::Tensor()>& float64,
                                             double factor64) {
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
  // One chunk at a time, in two passes: a scan for the figures and whether
  // the chunk is clean (everything finite, everything within tolerance),
  // then, only for a chunk that is not, the element-by-element pass on the
  // host that finds the verdict and its detail. A device output above
  // kHostCompareLimit is scanned where it lives (a few kernels and one copy
  // of five numbers per chunk, instead of copying it all to the host).
  const at::Tensor out_flat = out.detach().reshape(-1), ref_flat = ref.detach().reshape(-1);
  const int64_t n = ref_flat.numel();
  const bool on_device = !ref_flat.is_cpu() && n > kHostCompareLimit;
  const int64_t chunk = on_device ? kDeviceCompareChunk : kCompareChunk;
  at::Tensor ref64_flat;  // asked for at the first chunk with an element outside the tolerance
  double slack64 = 0;     // factor64 x stock's largest error against it
  for (int64_t c0 = 0; c0 < n; c0 += chunk) {
    const int64_t len = std::min(chunk, n - c0);
    const at::Tensor oc = out_flat.narrow(0, c0, len), rc = ref_flat.narrow(0, c0, len);
    const ChunkScan scan = on_device ? scan_with_ops(oc, rc, tol) : scan_on_host(oc, rc, tol);
    if (scan.clean()) {
      stats.worst_abs = std::max(stats.worst_abs, scan.worst_abs);
      stats.worst_rel = std::max(stats.worst_rel, scan.worst_rel);
      if (tol.atol > 0 || tol.rtol > 0) stats.worst_tol = std::max(stats.worst_tol, scan.worst_tol);
      continue;
    }
    if (float64 && !ref64_flat.defined()) {
      const at::Tensor r64 = float64();
      if (r64.defined() && r64.sizes() == ref.sizes() && at::isFloatingType(r64.scalar_type())) {
        ref64_flat = r64.detach().reshape(-1);
        if (factor64 > 0) slack64 = factor64 * stock_error64(ref_flat, ref64_flat);
      }
    }
    const at::Tensor r64c = ref64_flat.defined() ? ref64_flat.narrow(0, c0, len) : at::Tensor();
    if (auto m = compare_elements(oc, rc, r64c, slack64, c0, ref.sizes(), tol, prefix, where, stats)) return m;
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
