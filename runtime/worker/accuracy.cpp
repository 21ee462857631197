// Accuracy against a float64 evaluation of the op (see accuracy.h).
//
// Why this rule. An honest kernel differs from the stock one by rounding: it
// sums in another order, uses another exp, fuses or does not fuse a multiply
// and an add. Its error against the exact result is then of the same size as
// the stock kernel's, element by element, within a small factor. The size
// depends on the element: a few ulps of the value where the op is well
// conditioned (softmax, rstd, a mean of positive terms), an absolute amount
// where the output is a difference of larger terms (layer_norm's
// (x - mean) * rstd * w + b near 0: ~ulp(|x * scale|), not ulp(|out|)). A
// single atol covers the second case only by forgiving every value below it,
// which is the loophole (a softmax that zeroes probabilities below 1e-6).
//
// So the allowance at element i is built from the stock kernel's own errors
// against float64, e_s, at elements of i's magnitude (|ref64| bucketed by
// binade, i.e. by the frexp exponent: values within a factor of 2 share a
// bucket):
//   A_up[i]   = max e_s over buckets <= i's: stock's absolute error at values no
//               larger. An absolute error stock makes at small values is no
//               less an error at larger ones; where stock is accurate at small
//               values (softmax), these errors are tiny and nothing is given.
//   R_down[i] = max e_s / |ref64| over buckets >= i's: stock's relative error
//               at values no smaller, applied to |ref64[i]|. A relative error
//               stock makes at large values it makes at smaller ones too; it
//               never grants a small value more than stock's worst relative
//               error, so zeroing one (relative error 1) is never covered.
//   B_down[i] = max e_s over buckets >= i's, counting only elements where
//               e_s > cancel_ulps ulps: stock in the absolute-error regime
//               (cancellation). There the error is absolute and carries down
//               to every smaller value, whose own stock error may be lucky
//               (layer_norm's smallest |out| in a tensor: the one element
//               below it in magnitude may be a thousand times smaller; A_up
//               alone would then hold the candidate to stock's luck).
//   S[i] = max(A_up[i], |ref64[i]| * R_down[i], B_down[i])
// and the candidate passes element i when
//   |out - ref64| <= factor * S[i] + ulps * ulp(ref64[i]) + flush * smallest_normal.
// `ulps` lets an honest kernel round differently where stock happens to be
// exact (an element stock gets within 0 ulps still allows `ulps` ulps);
// `factor` lets it be somewhat less accurate than stock where both have real
// errors (a sequential sum against stock's cascade); `flush` lets results in
// the subnormal range be flushed to 0 (an exp that returns 0 below ln(FLT_MIN)
// and the like), which no value of a useful size hides in. `cancel_ulps` is far
// above the error stock makes where it is well conditioned (the stock CPU
// softmax on rows of 32768 stays below 30 ulps; a stock kernel that drifts over
// it only imports its own absolute error, which the family's atol check
// bounds anyway).
//
// The default constants per output dtype (measured by an ad hoc harness, see
// the commit message; the family file can override them):
//   float32:  factor 4, ulps 8, cancel_ulps 256, flush 4.
//             Honest CPU kernels (the targets' own templates, scalar
//             sequential-sum re-implementations, ATen-op compositions) reached
//             at most ~0.4 of the allowance at the family ranges; zeroing
//             values below 1e-6 reaches ~1e5-1e7 of it, bfloat16 internals
//             ~1e3-1e4.
//   bfloat16, float16: factor 2, ulps 2, cancel_ulps 16, flush 4 (bf16) / 0 (fp16).
//             Stock rounds an fp32 result once (<= 0.5 ulp); an honest kernel
//             computing in fp32 rounds once too, and may land on the other
//             side of a tie (1 ulp) or round twice (xhat stored, then the
//             affine: <= 1.5 ulps); 2 ulps covers both. fp16 has subnormals
//             down to 6e-8 that stock produces exactly (its fp32 result rounded
//             to fp16); flushing them would lose values stock gets right: no flush.
//   float64:  disabled: the float64 evaluation is the stock kernel itself (no
//             more precise reference here); compare_to_reference alone applies.
#ifndef NDEBUG
#error "build with -DNDEBUG against the release wheel (docs/CAPTURE.md, the RecordFunction pitfall)"
#endif

#include "accuracy.h"

#include <ATen/core/LegacyTypeDispatch.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <limits>

namespace forge::worker {
namespace {

std::string num(double v, int digits = 6) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}

std::string index_of(at::IntArrayRef sizes, int64_t flat) {
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
  return out + ']';
}

// The dtype's floating-point format: digits (with the implicit bit), the
// frexp exponent of its smallest normal and of its largest finite value.
struct Format {
  int digits;
  int min_exponent;
  int max_exponent;
  double smallest_normal;
};

std::optional<Format> format_of(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Float: return Format{24, -125, 128, static_cast<double>(FLT_MIN)};
    case c10::ScalarType::Double: return Format{53, -1021, 1024, DBL_MIN};
    case c10::ScalarType::Half: return Format{11, -13, 16, 6.103515625e-05};
    case c10::ScalarType::BFloat16: return Format{8, -125, 128, static_cast<double>(FLT_MIN)};
    default: return std::nullopt;
  }
}

const char* dtype_key(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Float: return "float32";
    case c10::ScalarType::Double: return "float64";
    case c10::ScalarType::Half: return "float16";
    case c10::ScalarType::BFloat16: return "bfloat16";
    default: return nullptr;
  }
}

AccuracyRule default_rule(c10::ScalarType t) {
  AccuracyRule r;
  switch (t) {
    case c10::ScalarType::Float: r.factor = 64, r.ulps = 8, r.cancel_ulps = 256, r.flush = 4; break;
    case c10::ScalarType::BFloat16: r.factor = 8, r.ulps = 2, r.cancel_ulps = 16, r.flush = 4; break;
    case c10::ScalarType::Half: r.factor = 8, r.ulps = 2, r.cancel_ulps = 16, r.flush = 0; break;
    case c10::ScalarType::Double: r.enabled = false; break;
    default: r.enabled = false; break;
  }
  return r;
}

bool is_float(const at::Tensor& t) { return t.defined() && at::isFloatingType(t.scalar_type()); }

// The argument converted for the float64 evaluation; counts what it converted.
c10::IValue to_double(const c10::IValue& v, int& converted, int& already_double) {
  auto one = [&](const at::Tensor& t) -> at::Tensor {
    if (!t.defined()) return t;
    if (!at::isFloatingType(t.scalar_type())) return t.clone();
    if (t.scalar_type() == at::kDouble) {
      ++already_double;
      return t.clone();
    }
    ++converted;
    // Same device, strides preserved (dense tensors), always a copy: the
    // reference never touches the case's buffers.
    return t.to(at::kDouble, /*non_blocking=*/false, /*copy=*/true);
  };
  if (v.isTensor()) return c10::IValue(one(v.toTensor()));
  if (v.isTensorList()) {
    c10::List<at::Tensor> list;
    for (const at::Tensor& t : v.toTensorList()) list.push_back(one(t));
    return c10::IValue(list);
  }
  return v;
}

}  // namespace

std::vector<at::Tensor> call_reference64(const OpSpec& spec, const std::vector<c10::IValue>& args,
                                         std::string* why_not) {
  auto none = [&](const std::string& why) {
    if (why_not) *why_not = "no float64 reference for " + spec.name + ": " + why +
                            "; accuracy checked against the stock kernel only (family tolerance)";
    return std::vector<at::Tensor>{};
  };
  if (!spec.op) return none("the op is not in the dispatcher");
  const auto& formal = spec.op->schema().arguments();
  torch::jit::Stack stack;
  stack.reserve(args.size());
  int converted = 0, already_double = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    c10::IValue v = to_double(args[i], converted, already_double);
    const std::string name = i < formal.size() ? formal[i].name() : std::string();
    const bool dtype_arg = i < spec.args.size() && spec.args[i].kind == ArgKind::Dtype;
    if (dtype_arg && v.isInt()) {
      // An explicit result dtype (mean.dim's dtype=, softmax.int's dtype=): a
      // float one becomes double, or the evaluation rounds back to it.
      auto st = static_cast<c10::ScalarType>(v.toInt());
      if (at::isFloatingType(st)) v = c10::IValue(static_cast<int64_t>(at::kDouble));
    } else if (name == "half_to_float" && v.isBool()) {
      // _softmax / _log_softmax: half_to_float asks for a float32 result of a
      // float16 input; a double input has no such path (and needs none).
      v = c10::IValue(false);
    }
    stack.push_back(std::move(v));
  }
  if (converted == 0)
    return none(already_double ? "its floating inputs are float64 already" : "it has no floating tensor input");
  try {
    at::AutoDispatchBelowADInplaceOrView below_autograd;  // as call_stock: the backend kernel
    spec.op->callBoxed(&stack);
  } catch (const std::exception& e) {
    std::string what = e.what();
    if (auto nl = what.find('\n'); nl != std::string::npos) what.resize(nl);
    if (what.size() > 200) what = what.substr(0, 200) + "...";
    return none("the op refused float64 inputs (" + what + ")");
  }
  std::vector<at::Tensor> outs;
  for (auto& v : stack) {
    if (v.isTensor()) outs.push_back(v.toTensor());
    else if (v.isNone()) outs.emplace_back();
    else return none(std::string("it returns a ") + v.tagKind());
  }
  return outs;
}

AccuracyRule accuracy_rule_for(const json& family_json, c10::ScalarType out) {
  AccuracyRule r = default_rule(out);
  const char* key = dtype_key(out);
  if (!key || !family_json.is_object() || !family_json.contains("accuracy")) return r;
  const json& acc = family_json["accuracy"];
  if (acc.is_null()) return r;
  if (!acc.is_object()) throw RequestError("family.accuracy must be an object keyed by dtype");
  if (!acc.contains(key)) return r;
  const json& e = acc[key];
  if (!e.is_object()) throw RequestError(std::string("family.accuracy.") + key + " must be an object");
  auto number = [&](const char* field, double& dst) {
    if (!e.contains(field)) return;
    if (!e[field].is_number() || !(e[field].get<double>() >= 0) || !std::isfinite(e[field].get<double>()))
      throw RequestError(std::string("family.accuracy.") + key + "." + field + " must be a number >= 0");
    dst = e[field].get<double>();
  };
  for (auto it = e.begin(); it != e.end(); ++it) {
    const std::string& k = it.key();
    if (k != "enabled" && k != "factor" && k != "ulps" && k != "cancel_ulps" && k != "flush" && k != "rel")
      throw RequestError(std::string("family.accuracy.") + key + ": unknown key \"" + k + "\"");
  }
  if (e.contains("enabled")) {
    if (!e["enabled"].is_boolean()) throw RequestError(std::string("family.accuracy.") + key + ".enabled must be a bool");
    r.enabled = e["enabled"].get<bool>();
  }
  number("factor", r.factor);
  number("ulps", r.ulps);
  number("cancel_ulps", r.cancel_ulps);
  number("flush", r.flush);
  if (e.contains("rel")) {
    number("rel", r.rel);
    r.rel_set = true;
  }
  if (r.enabled && r.ulps == 0 && r.flush == 0)
    throw RequestError(std::string("family.accuracy.") + key + ": ulps and flush cannot both be 0");
  return r;
}

std::optional<Mismatch> check_accuracy(const at::Tensor& out, const at::Tensor& stock, const at::Tensor& ref64,
                                       const AccuracyRule& rule, const std::string& label, const std::string& where,
                                       AccuracyStats& stats) {
  if (!out.defined() || !stock.defined() || !ref64.defined() || !rule.enabled || !is_float(stock) ||
      !is_float(ref64) || out.sizes() != stock.sizes() || ref64.sizes() != stock.sizes()) {
    ++stats.outputs_skipped;
    return std::nullopt;
  }
  if (stock.numel() == 0) return std::nullopt;
  const auto fmt = format_of(stock.scalar_type());
  if (!fmt) {
    ++stats.outputs_skipped;
    return std::nullopt;
  }
  const auto dev = stock.device();
  const auto dbl = at::TensorOptions().dtype(at::kDouble).device(dev);
  at::Tensor o = out.to(dbl).reshape(-1);
  at::Tensor s = stock.to(dbl).reshape(-1);
  at::Tensor r = ref64.to(dbl).reshape(-1);
  at::Tensor finite = o.isfinite() & s.isfinite() & r.isfinite();
  at::Tensor outside = finite.logical_not();
  at::Tensor ar = r.abs().masked_fill(outside, 0.0);
  at::Tensor ec = (o - r).abs().masked_fill(outside, 0.0);
  at::Tensor es = (s - r).abs().masked_fill(outside, 0.0);

  // Binade of |ref64| (frexp exponent, |x| = m 2^e, m in [0.5, 1)); zeros
  // below every subnormal. ulp = 2^(max(e, min_exponent) - digits).
  const int64_t lo = fmt->min_exponent - fmt->digits;  // below the smallest subnormal's exponent
  const int64_t hi = fmt->max_exponent + 2;
  at::Tensor e = std::get<1>(at::frexp(ar)).to(at::kLong);
  e = at::where(ar.eq(0), at::full_like(e, lo), e).clamp(lo, hi);
  at::Tensor ulp = at::exp2((e.clamp_min(fmt->min_exponent) - fmt->digits).to(at::kDouble));
  at::Tensor bucket = e - lo;
  const int64_t nb = hi - lo + 1;

  at::Tensor rel = at::where(ar.gt(0), es / ar.clamp_min(std::numeric_limits<double>::min()), at::zeros_like(es));
  at::Tensor cancel = es.masked_fill(es.le(ulp * rule.cancel_ulps), 0.0);
  auto per_bucket = [&](const at::Tensor& v) {
    return at::zeros({nb}, dbl).scatter_reduce(0, bucket, v, "amax", /*include_self=*/true).cpu();
  };
  at::Tensor abs_b = per_bucket(es), rel_b = per_bucket(rel), can_b = per_bucket(cancel);
  {
    double* a = abs_b.data_ptr<double>();
    double* rr = rel_b.data_ptr<double>();
    double* c = can_b.data_ptr<double>();
    for (int64_t k = 1; k < nb; ++k) a[k] = std::max(a[k], a[k - 1]);  // A_up: no larger
    for (int64_t k = nb - 1; k-- > 0;) {
      rr[k] = std::max(rr[k], rr[k + 1]);  // R_down: no smaller
      c[k] = std::max(c[k], c[k + 1]);     // B_down: no smaller, absolute regime
    }
  }
  abs_b = abs_b.to(dev), rel_b = rel_b.to(dev), can_b = can_b.to(dev);
  at::Tensor env = at::maximum(at::maximum(abs_b.index_select(0, bucket), ar * rel_b.index_select(0, bucket)),
                               can_b.index_select(0, bucket));
  at::Tensor allowed = env * rule.factor + ulp * rule.ulps + ar * rule.rel + rule.flush * fmt->smallest_normal;
  at::Tensor ratio = (ec / allowed).masked_fill(outside, 0.0);

  stats.checked += finite.sum().item<int64_t>();
  {
    // In ulps where values are not flushable (a flushed subnormal is millions of ulps off).
    at::Tensor in_range = ar.ge(rule.flush * fmt->smallest_normal);
    stats.candidate_max_ulps =
        std::max(stats.candidate_max_ulps, (ec / ulp).masked_fill(in_range.logical_not(), 0.0).max().item<double>());
    stats.stock_max_ulps =
        std::max(stats.stock_max_ulps, (es / ulp).masked_fill(in_range.logical_not(), 0.0).max().item<double>());
  }
  const int64_t i = ratio.argmax().item<int64_t>();
  const double worst = ratio[i].item<double>();
  const std::string prefix = label.empty() ? std::string() : label + ": ";
  auto at_i = [&](const at::Tensor& t) { return t[i].item<double>(); };
  if (worst > stats.worst_ratio) {
    stats.worst_ratio = worst;
    stats.worst_where = (label.empty() ? std::string("out") : label) + index_of(stock.sizes(), i) + " " + where;
    stats.worst_candidate_err = at_i(ec);
    stats.worst_stock_err = at_i(es);
    stats.worst_ref = at_i(r);
  }
  if (!(worst > 1)) return std::nullopt;
  const double u = at_i(ulp);
  return Mismatch{"inaccurate",
                  prefix + "error " + num(at_i(ec), 3) + " (" + num(at_i(ec) / u, 3) + " ulps) at index " +
                      index_of(stock.sizes(), i) + " " + where + ": got " + num(at_i(o), 9) + ", float64 " +
                      num(at_i(r), 9) + ", stock " + num(at_i(s), 9) + " (error " + num(at_i(es) / u, 3) +
                      " ulps); allowed " + num(at_i(allowed), 3) + " = " + num(rule.factor) + " x stock envelope " +
                      num(at_i(env), 3) + " + " + num(rule.ulps) + " ulps (" + num(worst, 3) + "x the allowance)"};
}

}  // namespace forge::worker
