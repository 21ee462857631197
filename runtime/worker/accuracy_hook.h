// The float64 accuracy rule (accuracy.h) as verify and benchmark call it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "op_args.h"

namespace forge::worker {

// The op evaluated in float64 on the same inputs; empty when it has no float64 path.
std::vector<at::Tensor> reference_float64(const OpSpec& spec, const std::vector<c10::IValue>& args);

// Whether a float64 evaluation of these outputs may be made outside the
// memory plan: host outputs, or device outputs of at most kHostCompareLimit
// elements each (compare.h).
bool small_for_float64(const std::vector<at::Tensor>& outputs);

// The accuracy rule's factor for this output dtype (accuracy.h; 0 where the
// rule is off): compare_to_reference's second chance allows this many times
// stock's own error against float64, as the rule does.
double float64_factor(const json& family_json, c10::ScalarType out);

// The candidate's error against ref64 compared with the stock kernel's error
// (targets/<family>/family.yaml `accuracy:`, in `family_json`; `family` is
// the same family parsed); *record collects the worst ratio. first/count:
// the window check_accuracy takes (count -1: every element).
std::optional<Mismatch> accuracy_against_float64(const Family& family, const json& family_json, const at::Tensor& out, const at::Tensor& stock,
                                                 const at::Tensor& ref64, const std::string& label,
                                                 const std::string& where, json* record, int64_t first = 0,
                                                 int64_t count = -1);

}  // namespace forge::worker
