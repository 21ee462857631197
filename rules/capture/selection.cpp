#include "rules/capture/selection.h"

#include <set>

#include "runtime/common/abi_args.h"

namespace forge {
using nlohmann::json;

namespace {

// Samplers whose default overload has no `generator` argument (randperm,
// rand, native_dropout), or whose capture may lack argument names; by the op's
// name without its overload.
const std::set<std::string>& random_ops() {
  static const std::set<std::string> ops = {
      "uniform_",   "normal_",     "normal",       "bernoulli_",   "bernoulli",   "random_",
      "exponential_", "geometric_", "cauchy_",     "log_normal_",  "randperm",    "rand",
      "randn",      "randint",     "rand_like",    "randn_like",   "randint_like", "multinomial",
      "poisson",    "binomial",    "native_dropout", "_fused_dropout", "rrelu_with_noise",
      "_standard_gamma", "_sample_dirichlet"};
  return ops;
}

bool flag_false(const json& args, const char* name) {
  for (const auto& a : args)
    if (a.is_object() && a.value("name", "") == name && a.value("value", json()) == false) return true;
  return false;
}

// "cpu and cuda": the device types among the records, sorted.
std::string device_types(const json& args, const json& outputs) {
  std::set<std::string> types;
  for (const json* list : {&args, &outputs})
    for (const auto& v : *list)
      if (v.is_object() && v.contains("device") && v["device"].is_string()) {
        const std::string d = v["device"].get<std::string>();
        types.insert(d.substr(0, d.find(':')));
      }
  std::string out;
  for (const auto& t : types) out += (out.empty() ? "" : " and ") + t;
  return out;
}

}  // namespace

bool is_transfer(const json& args, const json& outputs) {
  // A 0-dim CPU input beside device tensors is a scalar the kernel reads on
  // the host (`x * 0.5` on CUDA passes 0.5 so), not a copy.
  json kept = json::array();
  for (const auto& a : args)
    if (!(a.is_object() && a.value("device", "") == "cpu" && a.contains("sizes") && a["sizes"].is_array() &&
          a["sizes"].empty()))
      kept.push_back(a);
  return device_types(kept, outputs).find(" and ") != std::string::npos;
}

bool draws_random_numbers(const std::string& op, const json& args) {
  if (flag_false(args, "train") || flag_false(args, "training")) return false;
  if (random_ops().count(op.substr(0, op.find('.')))) return true;
  for (const auto& a : args)
    if (a.is_object() && (a.value("name", "") == "generator" || a.value("type", "") == "Generator")) return true;
  return false;
}

std::string abi_problem(const json& args, const json& outputs) { return abi::call_problem(args, outputs); }

std::optional<LeftOut> inherent_reason(const json& entry, const std::string& backend) {
  const std::string op = entry.value("op", "");
  const std::string kind = entry.value("kind", "kernel");
  const json& args = entry.contains("args") && entry["args"].is_array() ? entry["args"] : json::array();
  const json& outputs = entry.contains("outputs") && entry["outputs"].is_array() ? entry["outputs"] : json::array();
  if (kind == "view") return LeftOut{Selection::View, "a view or alias of its input: no kernel runs"};
  if (kind == "alloc") return LeftOut{Selection::Alloc, "an allocation: no kernel computes anything"};
  if (kind == "foreign")
    return LeftOut{Selection::NotAten, "not an ATen op (a custom or library op): forge overrides ATen kernels"};
  if (is_transfer(args, outputs))
    return LeftOut{Selection::Transfer, "copies between " + device_types(args, outputs) +
                                            ": bound by the link between them, not by a kernel"};
  const std::string key = backend == "cuda" ? "CUDA" : "CPU";
  if (const std::string ran = entry.value("dispatch_key", "CPU"); ran != key)
    return LeftOut{Selection::HostOp, "ran at dispatch key " + ran + " in a model on the " + backend +
                                          " backend (set-up or data preparation); its wall time is not comparable"};
  if (draws_random_numbers(op, args))
    return LeftOut{Selection::Random, "draws random numbers: a kernel's stream would differ from stock's, so there is "
                                      "nothing to verify it against"};
  if (std::string p = abi_problem(args, outputs); !p.empty()) return LeftOut{Selection::Abi, p};
  return std::nullopt;
}

}  // namespace forge
