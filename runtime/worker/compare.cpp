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

}  // namespace

Tolerance tolerance_for(const Family& family, c10::ScalarType out, std::optional<c10::ScalarType> in) {
  auto lookup = [&](c10::ScalarType t) -> std::optional<Tolerance> {
    std::string key = dtype_text(t);
    if (!family.tolerance.contains(key)) return std::nullopt;
    const json& e = family.tolerance[key];
    if (!e.is_object()) return std::nullopt;
    return Tolerance{e.value("atol", 0.0), e.value("rtol", 0.0)};
  };
  if (!at::isFloatingType(out)) return Tolerance{0, 0};
  if (auto t = lookup(out)) return *t;
  if (in)
    if (auto t = lookup(*in)) return *t;
  switch (out) {
    case c10::ScalarType::Double: return {1e-12, 1e-10};
    case c10::ScalarType::Half: return {1e-3, 1e-3};
    case c10::ScalarType::BFloat16: return {4e-3, 1.6e-2};
    default: return {1e-6, 1e-5};
  }
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

std::string index_text(at::IntArrayRef sizes, int64_t flat) {
  std::vector<int64_t> idx(sizes.size());
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    int64_t s = std::max<int64_t>(sizes[d], 1);
    idx[static_cast<size_t>(d)] = flat % s;
    flat /= s;
  }
  std::string out = "[";
  for (size_t d = 0; d < idx.size(); ++d) {
    if (d) out += ',';
    out += std::to_string(idx[d]);
  }
  out += ']';
  return out;
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
  at::Tensor o = out.to(at::kDouble).reshape(-1);
  at::Tensor r = ref.to(at::kDouble).reshape(-1);
  at::Tensor fo = o.isfinite(), fr = r.isfinite();
  at::Tensor same_special = (o.isnan() & r.isnan()) | o.eq(r);
  at::Tensor bad_special = (fo.logical_not() | fr.logical_not()) & same_special.logical_not();
  if (bad_special.any().item<bool>()) {
    int64_t i = bad_special.nonzero().select(1, 0).min().item<int64_t>();
    return Mismatch{"nan_mismatch", prefix + "got " + fmt(value_at(o, i)) + ", expected " + fmt(value_at(r, i)) +
                                        " at index " + index_text(ref.sizes(), i) + " " + where +
                                        " (NaN and inf must match the stock kernel exactly)"};
  }
  at::Tensor both = fo & fr;
  at::Tensor err = (o - r).abs().masked_fill(both.logical_not(), 0.0);
  at::Tensor rabs = r.abs();
  at::Tensor rel = (err / rabs.clamp_min(static_cast<double>(FLT_MIN))).masked_fill(both.logical_not(), 0.0);
  stats.worst_abs = std::max(stats.worst_abs, err.max().item<double>());
  stats.worst_rel = std::max(stats.worst_rel, rel.max().item<double>());
  at::Tensor allowed = rabs * tol.rtol + tol.atol;
  if (tol.atol > 0 || tol.rtol > 0)
    stats.worst_tol = std::max(stats.worst_tol, (err / allowed).masked_fill(allowed.eq(0), 0.0).max().item<double>());
  at::Tensor excess = err - allowed;
  at::Tensor viol = excess.gt(0);
  if (!viol.any().item<bool>()) return std::nullopt;
  // Report the element furthest outside its tolerance.
  int64_t i = excess.argmax().item<int64_t>();
  return Mismatch{"wrong_result", prefix + "max abs err " + fmt(value_at(err, i)) + " (rel " + fmt(value_at(rel, i)) +
                                      ") at index " + index_text(ref.sizes(), i) + " " + where + ": got " +
                                      fmt(value_at(o, i), 9) + ", expected " + fmt(value_at(r, i), 9) + " (atol " +
                                      fmt(tol.atol) + ", rtol " + fmt(tol.rtol) + ")"};
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
