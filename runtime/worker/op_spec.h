// The worker's parsing: a request's JSON into the call spec. The op found in
// the dispatcher and its arguments rebuilt from the capture's records
// (docs/CAPTURE.md, the JSON schema), with what the candidate ABI cannot carry
// noted (the family's parameters: family_params.h). Part of op_args.h.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "evaluator.h"
#include "family_params.h"

namespace forge::worker {

enum class ArgKind { Tensor, None, Int, Float, Bool, IntList, Dtype, Str, Unsupported };

// One argument of the op, as captured.
struct ArgSpec {
  std::string name;
  std::string type;            // the record's "type", for messages
  ArgKind kind = ArgKind::None;
  bool schema_tensor = false;  // Tensor or Tensor? in the schema: goes to call.inputs
  // Tensor
  c10::ScalarType dtype = c10::ScalarType::Float;
  std::vector<int64_t> sizes, strides;
  c10::Device device{c10::kCPU};
  // Int (also Layout and MemoryFormat, as torch's enum value), Bool, Dtype (c10::ScalarType)
  int64_t i = 0;
  double f = 0;
  std::vector<int64_t> ints;
  std::string text;  // Str
  bool changed = false;  // Tensor: the call changes it (the record's "changed")
};

struct OpSpec {
  std::optional<c10::OperatorHandle> op;
  std::string name;  // "aten::_softmax" or "aten::add.Tensor"
  std::vector<ArgSpec> args;
  bool cuda = false;        // some tensor lives on a CUDA device
  std::string abi_problem;  // non-empty: the op cannot be expressed in the ABI
  // Inputs the call changes (docs/CANDIDATE_ABI.md, "Changed inputs"): the
  // capture saw their bits change (batch norm's running statistics in
  // training) or the schema marks them written. Inputs stay read-only for a
  // kernel; it returns each one's new value as an output instead.
  std::vector<int> changed;                         // argument indices
  std::vector<int> extra_outputs;                   // changed arguments no return aliases, after the returns
  std::vector<std::pair<int, int>> alias_returns;   // (return k, argument i): return k is argument i (`add_`'s self)
};

// Finds the op in the dispatcher and rebuilds its argument records. Throws
// RequestError for a malformed request or an unknown op.
OpSpec parse_op(const json& request, bool cuda_available);

// The c10::IValue of a non-tensor argument (throws RequestError for a kind
// that cannot be rebuilt).
c10::IValue scalar_ivalue(const ArgSpec& a);

// "float32" -> Float (the capture's dtype names); nullopt for an unknown name.
std::optional<c10::ScalarType> dtype_from_name(const std::string& name);

}  // namespace forge::worker
