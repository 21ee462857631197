// The float64 accuracy rule (accuracy.h) as verify.cpp calls it.
#include "accuracy_hook.h"

#include "accuracy.h"

namespace forge::worker {

std::vector<at::Tensor> reference_float64(const OpSpec& spec, const std::vector<c10::IValue>& args) {
  return call_reference64(spec, args);
}

double float64_factor(const json& family_json, c10::ScalarType out) {
  const AccuracyRule rule = accuracy_rule_for(family_json, out);
  return rule.enabled ? rule.factor : 0;
}

bool small_for_float64(const std::vector<at::Tensor>& outputs) {
  for (const auto& t : outputs)
    if (t.defined() && !t.is_cpu() && t.numel() > kHostCompareLimit) return false;
  return true;
}

std::optional<Mismatch> accuracy_against_float64(const Family& family, const json& family_json, const at::Tensor& out, const at::Tensor& stock,
                                                 const at::Tensor& ref64, const std::string& label,
                                                 const std::string& where, json* record, int64_t first,
                                                 int64_t count) {
  AccuracyStats stats;
  AccuracyRule rule = accuracy_rule_for(family_json, out.scalar_type());
  if (!rule.rel_set) rule.rel = tolerance_for(family, out.scalar_type(), std::nullopt).rtol;
  auto m = check_accuracy(out, stock, ref64, rule, label, where, stats, first, count);
  if (record && stats.checked > 0 && stats.worst_ratio >= record->value("worst_ratio", -1.0)) {
    (*record)["worst_ratio"] = stats.worst_ratio;
    (*record)["worst_where"] = stats.worst_where;
    (*record)["candidate_max_ulps"] = std::max(stats.candidate_max_ulps, record->value("candidate_max_ulps", 0.0));
    (*record)["stock_max_ulps"] = std::max(stats.stock_max_ulps, record->value("stock_max_ulps", 0.0));
  }
  return m;
}

}  // namespace forge::worker
