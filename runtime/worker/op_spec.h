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
};

struct OpSpec {
  std::optional<c10::OperatorHandle> op;
  std::string name;  // "aten::_softmax" or "aten::add.Tensor"
  std::vector<ArgSpec> args;
  bool cuda = false;        // some tensor lives on a CUDA device
  std::string abi_problem;  // non-empty: the op cannot be expressed in the ABI
};

// Finds the op in the dispatcher and rebuilds its argument records. Throws
// RequestError for a malformed request or an unknown op.
OpSpec parse_op(const json& request, bool cuda_available);

// "float32" -> Float (the capture's dtype names); nullopt for an unknown name.
std::optional<c10::ScalarType> dtype_from_name(const std::string& name);

}  // namespace forge::worker
