// Accuracy against a float64 evaluation of the op (see accuracy.h).
//
// Why this rule. An honest kernel differs from the stock one by rounding: it
// sums in another order, uses another exp, fuses or does not fuse a multiply
// and an add. Its error against the exact result is then of the same kind as
// the stock kernel's, element by element, and within a factor of it (a large
// one where stock uses a better algorithm, see below). The kind depends on
// the element: a few ulps of the value where the op is well
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
//   |out - ref64| <= factor * S[i] + ulps * ulp(ref64[i]) + rel * |ref64[i]|
//                    + flush * smallest_normal.
// `ulps` lets an honest kernel round differently where stock happens to be
// exact (an element stock gets within 0 ulps still allows `ulps` ulps); `rel`
// (accuracy_hook.cpp: the family's rtol unless the block sets it) is the
// relative error any honest kernel of the dtype may have, whatever stock's (an
// fp32 row summed in order is ~sqrt(n) ulps off where stock's cascade is 1);
// `factor` lets it be less accurate than stock where both have real errors
// beyond that, above all where the output cancels (a mean of +-x, or
// x * scale + bias near 0) and stock's cascade sums are 100x better than any
// fp32 accumulation in lanes; `flush` lets results in the subnormal range be
// flushed to 0 (an exp that returns 0 below ln(FLT_MIN) and the like), which no
// value of a useful size hides in. Nothing else is absolute: zeroing a value
// stock gets right is an error of 100% of it against an allowance of a few
// ulps plus rel of it. `cancel_ulps` is far above the error stock makes where
// it is well conditioned (the stock CPU softmax on rows of 32768 stays below 70
// ulps, at 1e-30); a stock kernel that drifts over it only imports its own
// absolute error, which the family's atol check bounds anyway.
//
// The default constants per output dtype (a family file sets its own, with
// the measurement: targets/*/family.yaml `accuracy:`):
//   float32:  factor 64, ulps 8, cancel_ulps 256, flush 4.
//   bfloat16, float16: factor 8, ulps 2, cancel_ulps 16, flush 4 (bf16) / 0 (fp16).
//             Stock rounds an fp32 result once (<= 0.5 ulp); an honest kernel
//             computing in fp32 rounds once too, and may land on the other
//             side of a tie (1 ulp) or round twice (xhat stored, then the
//             affine: <= 1.5 ulps); 2 ulps covers both. fp16 has subnormals
//             down to 6e-8 that stock produces exactly (its fp32 result rounded
//             to fp16); flushing them would lose values stock gets right: no flush.
//   float64:  disabled: the float64 evaluation is the stock kernel itself (no
//             more precise reference here); compare_to_reference alone applies.
// Measured on the CPU (torch 2.14, the six families' verify ranges, 3 seeds,
// rel = rtol): the targets' own templates, scalar sequential-sum and ATen-op
// re-implementations stay at <= 0.6 of the allowance with these factors: 8
// (softmax, rms_norm), 16 (batch_norm), 64 (default), 128 (mean_hw), 256
// (layer_norm), 2048 (group_norm: the worst, its statistics are sums of 10^4
// terms). A softmax zeroing p < 1e-6 is >= 9e4 times over the allowance (it
// passes the family tolerance), one computing in bfloat16 internally >= 2e4.
#ifndef NDEBUG
#error "build with -DNDEBUG against the release wheel (docs/CAPTURE.md, the RecordFunction pitfall)"
#endif

#include "accuracy.h"

#include <ATen/core/LegacyTypeDispatch.h>

#include "../common/dtypes_torch.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

namespace forge::worker {
namespace {

// Elements checked per host pass: three float64 chunks of 128 MiB.
constexpr int64_t kAccuracyChunk = int64_t(1) << 24;

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

// The dtype's name (runtime/common/dtypes.h) for the four float formats above;
// nullptr for any other.
const char* dtype_key(c10::ScalarType t) {
  if (!format_of(t)) return nullptr;
  for (const auto& d : dtypes::kTorch)
    if (d.type == t) return d.name.data();  // the table's names are string literals
  return nullptr;
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
  } catch (const c10::OutOfMemoryError&) {
    throw;  // not a refusal of float64: evaluate.cpp plans again with less
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
                                       AccuracyStats& stats, int64_t first, int64_t count) {
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
  // On the host in float64, in chunks of kAccuracyChunk elements: one pass
  // gathers the stock kernel's errors per binade, one applies the allowance
  // (~10 ms per million elements on one core). A device output is copied
  // chunk by chunk, twice when it spans more than one chunk.
  // A window [first, first + count) of the flattened outputs, when given.
  auto flat = [&](const at::Tensor& t) {
    const at::Tensor f = t.detach().reshape(-1);
    return count >= 0 ? f.narrow(0, first, std::min(count, f.numel() - first)) : f;
  };
  if (count < 0) first = 0;
  const at::Tensor of = flat(out), sf = flat(stock), rf = flat(ref64);
  const int64_t n = rf.numel();
  struct Host {
    at::Tensor o, s, r;
  };
  auto load = [&](int64_t c0, int64_t len) {
    auto host = [&](const at::Tensor& t) { return t.narrow(0, c0, len).to(at::kCPU).to(at::kDouble).contiguous(); };
    return Host{host(of), host(sf), host(rf)};
  };
  const bool one_chunk = n <= kAccuracyChunk;
  const Host whole = one_chunk ? load(0, n) : Host{};
  // fn(first index, candidate, stock, float64, length) on each chunk in order.
  auto each_chunk = [&](auto&& fn) {
    for (int64_t c0 = 0; c0 < n; c0 += kAccuracyChunk) {
      const Host h = one_chunk ? whole : load(c0, std::min(kAccuracyChunk, n - c0));
      fn(c0, h.o.data_ptr<double>(), h.s.data_ptr<double>(), h.r.data_ptr<double>(), h.r.numel());
    }
  };

  // Binade of |ref64|: the frexp exponent e (|x| = m 2^e, m in [0.5, 1)),
  // zeros below every subnormal; ulp = 2^(max(e, min_exponent) - digits).
  const int lo = fmt->min_exponent - fmt->digits;  // below the smallest subnormal's exponent
  const int hi = fmt->max_exponent + 2;
  const int nb = hi - lo + 1;
  // frexp's exponent and ldexp(1, k) from the float64 bits: |values| here
  // are normal doubles or zero (every format checked is narrower than
  // float64), and the loops below run them several times per element.
  auto exponent = [&](double a) {
    if (a == 0) return lo;
    uint64_t bits;
    std::memcpy(&bits, &a, sizeof bits);
    const int biased = static_cast<int>((bits >> 52) & 0x7FF);
    if (biased == 0) return lo;  // a float64 subnormal: below every format's range
    return std::clamp(biased - 1022, lo, hi);
  };
  auto ulp_at = [&](int e) {
    const int k = std::max(e, fmt->min_exponent) - fmt->digits;  // within float64's normal range
    const uint64_t bits = static_cast<uint64_t>(k + 1023) << 52;
    double v;
    std::memcpy(&v, &bits, sizeof v);
    return v;
  };
  auto finite3 = [](double a, double b, double c) { return std::isfinite(a) && std::isfinite(b) && std::isfinite(c); };
  std::vector<double> abs_b(nb, 0.0), rel_b(nb, 0.0), can_b(nb, 0.0);
  int64_t checked = 0;
  each_chunk([&](int64_t, const double* o, const double* s, const double* r, int64_t len) {
    for (int64_t i = 0; i < len; ++i) {
      if (!finite3(o[i], s[i], r[i])) continue;
      ++checked;
      const double a = std::fabs(r[i]), es = std::fabs(s[i] - r[i]);
      const int e = exponent(a);
      const int b = e - lo;
      abs_b[b] = std::max(abs_b[b], es);
      if (a > 0) rel_b[b] = std::max(rel_b[b], es / a);
      if (es > rule.cancel_ulps * ulp_at(e)) can_b[b] = std::max(can_b[b], es);
    }
  });
  for (int k = 1; k < nb; ++k) abs_b[k] = std::max(abs_b[k], abs_b[k - 1]);  // A_up: no larger
  for (int k = nb - 1; k-- > 0;) {
    rel_b[k] = std::max(rel_b[k], rel_b[k + 1]);  // R_down: no smaller
    can_b[k] = std::max(can_b[k], can_b[k + 1]);  // B_down: no smaller, absolute regime
  }
  const double floor = rule.flush * fmt->smallest_normal;
  auto envelope = [&](double r, int e) {
    const int b = e - lo;
    return std::max({abs_b[b], std::fabs(r) * rel_b[b], can_b[b]});
  };
  auto allowance = [&](double r, int e, double ulp) {
    return rule.factor * envelope(r, e) + rule.ulps * ulp + rule.rel * std::fabs(r) + floor;
  };
  double worst = 0, cand_ulps = 0, stock_ulps = 0;
  int64_t wi = -1;
  double wo = 0, ws = 0, wr = 0;  // the worst element's candidate, stock and float64 values
  each_chunk([&](int64_t c0, const double* o, const double* s, const double* r, int64_t len) {
    for (int64_t i = 0; i < len; ++i) {
      if (!finite3(o[i], s[i], r[i])) continue;
      const double a = std::fabs(r[i]), ec = std::fabs(o[i] - r[i]);
      const int e = exponent(a);
      const double u = ulp_at(e);
      const double ratio = ec / allowance(r[i], e, u);  // > 0: ulps or flush is nonzero (accuracy_rule_for)
      if (ratio > worst || wi < 0) worst = ratio, wi = first + c0 + i, wo = o[i], ws = s[i], wr = r[i];
      if (a >= floor) {
        // In ulps where a value may not be flushed (a flushed subnormal is millions of ulps off).
        cand_ulps = std::max(cand_ulps, ec / u);
        stock_ulps = std::max(stock_ulps, std::fabs(s[i] - r[i]) / u);
      }
    }
  });
  stats.checked += checked;
  stats.candidate_max_ulps = std::max(stats.candidate_max_ulps, cand_ulps);
  stats.stock_max_ulps = std::max(stats.stock_max_ulps, stock_ulps);
  if (wi < 0) return std::nullopt;  // nothing finite to compare
  const double ec = std::fabs(wo - wr), es = std::fabs(ws - wr);
  if (worst > stats.worst_ratio) {
    stats.worst_ratio = worst;
    stats.worst_where = (label.empty() ? std::string("out") : label) + index_text(stock.sizes(), wi) + " " + where;
    stats.worst_candidate_err = ec;
    stats.worst_stock_err = es;
    stats.worst_ref = wr;
  }
  if (!(worst > 1)) return std::nullopt;
  const int we = exponent(std::fabs(wr));
  const double u = ulp_at(we);
  const std::string prefix = label.empty() ? std::string() : label + ": ";
  std::string terms =
      number_text(rule.factor) + " x stock envelope " + number_text(envelope(wr, we), 3) + " + " + number_text(rule.ulps) + " ulps";
  if (rule.rel > 0) terms += " + " + number_text(rule.rel) + " x |float64|";
  if (floor > 0) terms += " + " + number_text(floor, 3);
  return Mismatch{"inaccurate", prefix + "error " + number_text(ec, 3) + " (" + number_text(ec / u, 3) + " ulps) at index " +
                                    index_text(stock.sizes(), wi) + " " + where + ": got " + number_text(wo, 9) +
                                    ", float64 " + number_text(wr, 9) + ", stock " + number_text(ws, 9) + " (error " +
                                    number_text(es / u, 3) + " ulps); allowed " + number_text(allowance(wr, we, u), 3) + " = " + terms +
                                    " (" + number_text(worst, 3) + "x the allowance)"};
}

}  // namespace forge::worker
