// What makes a captured op no target whatever forge.yaml selects (engine/
// target.h, Selection): a view or allocation, a custom op, an op that ran on
// the host in a CUDA model, a cross-device copy, a random-number op, or an
// argument the candidate ABI cannot carry. forge.yaml's targets: (ops, top,
// min_share) is applied after this, by select_targets (engine/target.h).
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/target.h"

namespace forge {

struct LeftOut {
  Selection reason;
  std::string why;  // in words, naming the op, argument or devices
};

// The reason a capture entry ({op, kind, dispatch_key, args, outputs}) of a
// model on `backend` ("cpu" | "cuda") can be no target; nullopt when it can.
std::optional<LeftOut> inherent_reason(const nlohmann::json& entry, const std::string& backend);

// True when the tensors span more than one device type (a host<->device copy);
// a 0-dim CPU input (a Python number on a CUDA op) does not count.
bool is_transfer(const nlohmann::json& args, const nlohmann::json& outputs);

// Does backend op `op` ("uniform_", "normal.Tensor_float") draw random numbers
// with these argument records? Any op with a `generator` argument does, and
// the samplers without one (randperm, native_dropout, ...), unless a `train`
// or `training` argument is false (dropout in eval mode copies its input).
// A training-mode dropout is random: on CUDA it calls native_dropout, on the
// CPU bernoulli_ (then div_ and mul, which are not); in eval mode nn.Dropout
// calls no ATen op at all.
bool draws_random_numbers(const std::string& op, const nlohmann::json& args);

// What the candidate ABI (runtime/abi/forge_kernel.h) cannot carry in a call
// with these argument and output records: "" when it can carry all of it, else
// the first problem, naming the argument ("argument generator (Generator) has
// no representation in the candidate ABI"): runtime/common/abi_args.h, the
// rule the worker applies to the same records.
std::string abi_problem(const nlohmann::json& args, const nlohmann::json& outputs);

}  // namespace forge
