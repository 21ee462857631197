// A chain of captured ops as one op of the dispatcher (docs/WORKER.md,
// "Chains"): forge_chain::<name>, whose kernel runs the chain's ATen ops one
// by one, each on its captured constant arguments and on the chain's inputs
// or an earlier op's output. Registered from the request's "chain", it is the
// stock reference of a fused kernel for the chain, so verification, the
// float64 reference and the benchmark treat a chain as they treat an op.
#pragma once

#include <string>

#include "evaluator.h"

namespace forge::worker {

// Registers the chain named by request["op"] ("forge_chain::<name>") from
// request["chain"], once per process (the name is a digest of the
// definition). Throws RequestError for a malformed definition:
//   {"inputs": N,
//    "ops": [{"op": "aten::native_group_norm", "overload": "",
//             "args": [<capture argument records; a chain tensor has "ref":
//                       {"input": i} or {"op": j, "output": k}, j earlier>]}],
//    "outputs": M}   // the last op's first M returns, all tensors
void register_chain(const json& request);

}  // namespace forge::worker
