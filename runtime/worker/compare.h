// The worker's comparison: the stock kernel's reference output, and a
// candidate's outputs compared with it within the family's tolerance (NaN and
// inf exactly, integers exactly), bit for bit between runs; its torch-free
// rule (tolerances, detail texts) is compare_rule.h. Part of op_args.h.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "compare_rule.h"
#include "op_spec.h"

namespace forge::worker {

// Tolerance for an output of dtype `out`; `in` is the first floating input's
// dtype (the rule: compare_rule.h).
Tolerance tolerance_for(const Family& family, c10::ScalarType out, std::optional<c10::ScalarType> in);

// Calls the stock kernel through the dispatcher, below autograd, on clones of
// the tensor arguments (clone_inputs) or on them. Returns the op's returns,
// then the new value of each of spec.extra_outputs (the changed inputs no
// return aliases); throws RequestError when a return is not a tensor.
std::vector<at::Tensor> call_stock(const OpSpec& spec, const std::vector<c10::IValue>& args, bool clone_inputs);

// Comparisons. `label` names the output ("" for a single output), `where` the
// case ("on case sample 0"), for the detail text.
struct Mismatch {
  std::string reason;  // wrong_result | nan_mismatch
  std::string detail;
};
struct CompareStats {
  double worst_abs = 0;
  double worst_rel = 0;   // |out - ref| / |ref| (|ref| at least FLT_MIN)
  double worst_tol = 0;   // |out - ref| / (atol + rtol |ref|): 1 is the limit
};
// Outputs above this many elements are checked where they live on a device:
// compare_to_reference scans them with tensor ops there (only a failing
// chunk comes to the host), and the float64 accuracy check takes a window of
// this many elements at a random offset (verify.cpp, check_results). At or
// below it, a device output and its reference are copied to the host once.
constexpr int64_t kHostCompareLimit = int64_t(1) << 22;

// `float64` (when set) gives the op's float64 evaluation of this output
// (accuracy.h), asked for only when some element is outside the tolerance of
// `ref`: such an element passes when it is inside the same tolerance of the
// float64 value widened by `factor64` times stock's own largest error against
// it over the output's finite elements (the family's `compare_float64`:
// stock's vector math is off by more than atol in places, a kernel nearer the
// true value is not wrong, and an fp32 sum's rounding follows its partial
// sums, not its result, so two honest summation orders differ by more than
// any atol set for short rows; the factor is the accuracy rule's, which bounds
// the same error locally). NaN and inf still match `ref` exactly.
std::optional<Mismatch> compare_to_reference(const at::Tensor& out, const at::Tensor& ref, Tolerance tol,
                                             const std::string& label, const std::string& where,
                                             CompareStats& stats,
                                             const std::function<at::Tensor()>& float64 = {},
                                             double factor64 = 0);
// The stock kernel's largest error against its float64 evaluation (of the
// same sizes, on the host or stock's device) over the finite elements, a
// chunk at a time where stock's output lives.
double stock_error64(const at::Tensor& stock, const at::Tensor& ref64);
// The first element whose bits differ, as "[i,j] (a vs b)", or nullopt.
std::optional<std::string> first_bit_difference(const at::Tensor& a, const at::Tensor& b);


}  // namespace forge::worker
