// Which captured calls the candidate ABI (runtime/abi/forge_kernel.h) can
// carry, decided from the capture's argument records (docs/CAPTURE.md) alone.
// Torch-free and header-only, so forge decides whether an op can be a target
// (rules/evaluate/family.cpp) by the rule the worker applies to the same records
// (runtime/worker/op_spec.cpp), and says which argument stops it.
//
// Carried: tensors of an ABI dtype with at most FORGE_MAX_DIMS dims (or None);
// int, float, bool, ScalarType; Layout strided; the four memory formats;
// int lists (int[], or a list of int records) of at most FORGE_MAX_LIST; str
// of at most FORGE_MAX_STRING bytes (FORGE_ARG_STRING). Not carried: float[],
// bool[], Tensor[], complex, Device, Generator, symbolic sizes.
#pragma once

#include <string>

#include "../abi/forge_kernel.h"
#include "dtypes.h"

namespace forge::abi {

// What keeps record `i` (`rec`, the schema's argument `name` when known) out
// of the ABI, "" when nothing.
template <class Json>
std::string arg_problem(const Json& rec, size_t i, std::string name = "") {
  if (name.empty() && rec.is_object() && rec.contains("name") && rec["name"].is_string())
    name = rec["name"].template get<std::string>();  // the capture records the schema's name
  const std::string where = "argument " + std::to_string(i) + (name.empty() ? "" : " (" + name + ")");
  if (!rec.is_object() || !rec.contains("type") || !rec["type"].is_string()) return where + " has no type";
  const std::string t = rec["type"].template get<std::string>();
  auto value = [&]() -> const Json& { return rec["value"]; };
  if (t == "Tensor") {
    const std::string dtype = rec.contains("dtype") && rec["dtype"].is_string() ? rec["dtype"].template get<std::string>() : "";
    const dtypes::Dtype* d = dtypes::find(dtype);
    if (!d || d->abi < 0) return where + " has dtype " + (dtype.empty() ? "?" : dtype) + ", not in the candidate ABI";
    if (rec.contains("sizes") && rec["sizes"].is_array() && rec["sizes"].size() > FORGE_MAX_DIMS)
      return where + " has " + std::to_string(rec["sizes"].size()) + " dims (ABI max " +
             std::to_string(FORGE_MAX_DIMS) + ")";
    return "";
  }
  if (t == "None" || t == "int" || t == "float" || t == "bool" || t == "ScalarType") return "";
  if (t == "Layout")
    return rec.contains("value") && value() == "strided" ? "" : where + " (Layout) is not strided";
  if (t == "MemoryFormat") {
    if (rec.contains("value") && value().is_string()) {
      const std::string v = value().template get<std::string>();
      if (v == "contiguous_format" || v == "preserve_format" || v == "channels_last" || v == "channels_last_3d")
        return "";
    }
    return where + " (MemoryFormat) is not one the ABI names";
  }
  if (t == "int[]" || t == "list") {
    if (!rec.contains("value") || !value().is_array()) return where + " (" + t + ") has no values";
    if (t == "list")
      for (const auto& item : value())
        if (!item.is_object() || !item.contains("type") || item["type"] != "int")
          return where + " (a list of " + (item.is_object() && item.contains("type") ? item["type"].dump() : "?") +
                 ") has no representation in the candidate ABI";
    if (value().size() > FORGE_MAX_LIST)
      return where + " (" + t + ") has " + std::to_string(value().size()) + " entries (ABI max " +
             std::to_string(FORGE_MAX_LIST) + ")";
    return "";
  }
  if (t == "str") {
    if (!rec.contains("value") || !value().is_string()) return where + " (str) has no value";
    if (value().template get<std::string>().size() > FORGE_MAX_STRING)
      return where + " (str) is longer than " + std::to_string(FORGE_MAX_STRING) + " bytes (ABI max)";
    return "";
  }
  return where + " of type " + t + " has no representation in the candidate ABI";
}

// The first argument record the ABI cannot carry, "" when it carries them all.
template <class Json>
std::string args_problem(const Json& args) {
  if (!args.is_array()) return "the argument records are not a list";
  for (size_t i = 0; i < args.size(); ++i)
    if (std::string p = arg_problem(args[i], i); !p.empty()) return p;
  return "";
}

// The first output record the ABI cannot return, "" when it returns them
// all: outputs are tensors (or None) of an ABI dtype, at most FORGE_MAX_DIMS dims.
template <class Json>
std::string outputs_problem(const Json& outputs) {
  if (!outputs.is_array()) return "the output records are not a list";
  for (size_t k = 0; k < outputs.size(); ++k) {
    const Json& o = outputs[k];
    const std::string type = o.is_object() && o.contains("type") && o["type"].is_string()
                                 ? o["type"].template get<std::string>() : "";
    if (type == "None") continue;
    if (type != "Tensor")
      return "output " + std::to_string(k) + " is a " + (type.empty() ? std::string("value") : type) +
             ", not a tensor: the candidate ABI returns tensors only";
    std::string p = arg_problem(o, k);
    if (!p.empty()) return "output" + p.substr(std::string("argument").size());
  }
  return "";
}

// The call's first problem: arguments, then outputs; "" when the ABI carries it.
template <class Json>
std::string call_problem(const Json& args, const Json& outputs) {
  std::string p = args_problem(args);
  return p.empty() ? outputs_problem(outputs) : p;
}

}  // namespace forge::abi
