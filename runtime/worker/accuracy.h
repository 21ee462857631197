// Accuracy against a float64 evaluation of the op: a tolerance no kernel can
// game by construction (issue 29, item 4).
//
// compare_to_reference (op_args.h) checks |out - stock| <= atol + rtol |stock|.
// Its atol is a loophole: a softmax that writes 0 wherever the true value is
// below 1e-6 passes it with a relative error of 1. Here both the candidate's
// error and the stock kernel's error are measured against the op evaluated in
// float64 (call_reference64), elementwise, and the candidate may not be worse
// than stock by more than a stated factor plus a few ulps of the output dtype
// (check_accuracy). Where stock gets a small value right, so must the
// candidate; where stock itself has an absolute error (cancellation in
// x*scale + bias), the candidate gets the same absolute allowance. The rule
// and its constants: accuracy.cpp, and the `accuracy:` block of
// targets/softmax/family.yaml.
//
// Both checks apply: compare_to_reference (NaN/inf exactly where stock has
// them, the family's atol/rtol against stock) and check_accuracy (finite
// elements only, against float64).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "op_args.h"

namespace forge::worker {

// The op evaluated in float64: every floating tensor argument converted to
// kDouble (same device, same strides), a ScalarType argument naming a float
// dtype set to Double, `_softmax`/`_log_softmax`'s half_to_float set to false
// (a double input has no half-to-float path); the call goes through the
// dispatcher below autograd, like call_stock. Returns the op's returns
// (floating ones in double; others as the op gives them), or an empty vector
// when there is no float64 evaluation: no floating tensor argument, every one
// already float64 (the reference would be stock itself), the op refuses double
// or throws, or returns something other than tensors. Then only
// compare_to_reference applies; `why_not` (when given) says why, for a note.
std::vector<at::Tensor> call_reference64(const OpSpec& spec, const std::vector<c10::IValue>& args,
                                         std::string* why_not = nullptr);

// The accuracy rule for one output dtype (family["accuracy"][dtype]).
//
// For each element i where out, stock and ref64 are all finite, with
//   e_c = |out - ref64|, e_s = |stock - ref64|, u(x) = ulp of the output dtype at |x|
//   (subnormal spacing below the smallest normal),
// the candidate passes when
//   e_c[i] <= factor * S[i] + ulps * u(ref64[i]) + rel * |ref64[i]| + flush * smallest_normal(dtype)
// where S[i], the stock kernel's error envelope at i, is the largest of
//   - the stock's absolute error at elements no larger (|ref64| in i's binade or below),
//   - |ref64[i]| times the stock's relative error at elements no smaller (i's binade or above),
//   - the stock's absolute error at elements no smaller that are in the
//     absolute-error regime: e_s > cancel_ulps * u(ref64) there (stock itself
//     is off by far more than rounding: cancellation).
// Zeroing a small value that stock gets right gives e_c = |ref64| against an
// allowance of a few ulps of it: rejected. See accuracy.cpp for the reasoning.
struct AccuracyRule {
  bool enabled = true;       // false: not checked (float64 outputs by default)
  double factor = 64;        // times the stock kernel's error envelope
  double ulps = 8;           // plus this many ulps of the output dtype at |ref64|
  double cancel_ulps = 256;  // stock error beyond this many ulps: absolute-error regime
  double flush = 4;          // values below flush * smallest normal may be flushed to 0
  // Plus rel * |ref64|: the relative error any honest kernel of this dtype may
  // have (an fp32 row summed in order is ~sqrt(n) ulps off, where stock's
  // vectorized sums are closer). Unset: the family's tolerance rtol for the
  // dtype (accuracy_hook.cpp), which already bounds the error against stock.
  // It is relative: zeroing a small value is an error of 100% of it, never
  // covered.
  double rel = 0;
  bool rel_set = false;
};

// family["accuracy"][dtype name of `out`] ("float32", "bfloat16", "float16",
// "float64"), each key optional, over the defaults for that dtype; integer and
// bool outputs: disabled (they must match exactly). Throws RequestError for a
// malformed block.
AccuracyRule accuracy_rule_for(const json& family_json, c10::ScalarType out);

// What check_accuracy saw, accumulated over outputs and cases (the worst is kept).
struct AccuracyStats {
  double worst_ratio = 0;      // max e_c / allowance over checked elements: 1 is the limit
  std::string worst_where;     // "out[3,17] on case sample 0" where worst_ratio occurred
  double worst_candidate_err = 0;  // e_c there
  double worst_stock_err = 0;      // e_s there
  double worst_ref = 0;            // ref64 there
  double candidate_max_ulps = 0;   // max e_c / u(ref64) (values below the flush threshold left out)
  double stock_max_ulps = 0;       // max e_s / u(ref64), likewise
  int64_t checked = 0;         // elements checked
  int64_t outputs_skipped = 0; // outputs not checked (no reference, rule disabled, not floating)
};

// Checks one output. `out` is the candidate's, `stock` the stock kernel's,
// `ref64` the float64 evaluation's (call_reference64; undefined: skipped).
// `label` names the output ("" for a single output), `where` the case ("on case
// sample 0"). Returns a Mismatch with reason "inaccurate" when some finite
// element is outside its allowance (the detail names the worst one). With
// count >= 0, only the flattened elements [first, first + count) are checked,
// the stock envelope taken from them too (indices in the detail are the
// tensor's own).
std::optional<Mismatch> check_accuracy(const at::Tensor& out, const at::Tensor& stock, const at::Tensor& ref64,
                                       const AccuracyRule& rule, const std::string& label, const std::string& where,
                                       AccuracyStats& stats, int64_t first = 0, int64_t count = -1);

}  // namespace forge::worker
