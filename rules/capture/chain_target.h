// A chain (chains.h) as a target of its own: one op, forge_chain::c_<digest>,
// whose inputs are the tensors the chain reads from outside and whose outputs
// are its last op's returns; its stock kernel runs the chain's ATen ops one by
// one in the worker (runtime/worker/chain_op.h), so `forge try` verifies and
// times a fused kernel for the chain as it does one for an op (docs/SELECTION.md,
// "Chains").
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/target.h"
#include "rules/capture/chains.h"

namespace forge {

// The chain's target, or nullopt (with *why) when a chain cannot be one: an
// op argument that is a tensor list, an output that is not a tensor.
// Target::chain holds the definition the worker registers; args are the
// inputs' capture records, in the order the chain's ops read them (a tensor
// two ops read is one input where its record and its data in every captured
// call are the same: RMSNorm's x), samples from the ops' own captured calls.
std::optional<Target> chain_target(const std::string& model, const nlohmann::json& record, const Chain& chain,
                                   std::string* why);

}  // namespace forge
