// Chains of captured ops worth fusing, found in the capture's data flow
// (runtime/capture/flows.h): a run of backend ops in which every call of each
// op feeds its whole output to exactly one call of the next, and to nothing
// else recorded, so the intermediate tensors never escape the chain
// (docs/SELECTION.md, "Chains"). A chain's time is its ops' together; the
// single-op targets inside it stay targets of their own. A chain whose ops ran
// under several modules also yields each run of it that is one module's whole
// forward, as a chain of its own; a module class's whole forward is a chain
// whatever the shape of its data flow (find_forward_chains), and the runs
// inside it are not chains of their own.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace forge {

struct Chain {
  std::vector<int> entries;          // indices into the capture record's "entries", in data-flow order
  std::vector<std::string> ops;      // their ops ("pow.Tensor_Scalar", "mean.dim", ...; a cast "_to_copy")
  std::vector<std::string> signatures;
  long calls = 0;                    // calls of each op (all equal)
  double time_us = 0;                // the ops' time together
  // The deepest module every op of the chain ran under, itself or through its
  // submodules ("__main__.Block/__main__.RMSNorm"), "" when there is none or
  // the capture has no module paths; whole_forward: the chain is every kernel
  // that module's forward ran, submodules included, so a kernel for the chain
  // can stand in for the forward.
  std::string module;
  bool whole_forward = false;
  // Op j's tensor argument i read op k's output o: (j, i) -> (k, o), from the
  // capture's trace. Empty for chains found without one (records without a
  // trace, find_forward_chains): chain_target reads the aggregated flows.
  std::map<std::pair<int, int>, std::pair<int, int>> links;
};

// The dtype a captured entry casts to, when it is a cast into a fresh tensor
// (`x.to(torch.float32)`, `x.float()`, `y.type_as(x)` run copy_ into an empty
// one under that op): a chain op `_to_copy(src, dtype)`; else "".
std::string cast_dtype(const nlohmann::json& entry);

// An op that writes its first argument (`relu_`, `add_.Tensor`); a cast's
// copy_ is not one (the chain runs it as _to_copy).
bool in_place(const nlohmann::json& entry);

// The functional op an in-place op computes: "add_.Tensor" -> "add.Tensor",
// "relu_" -> "relu", "pow_.Scalar" -> "pow.Tensor_Scalar" (a tensor to a
// number's power; pow.Scalar raises a number to a tensor's). A chain's
// definition spells its in-place ops so (chain_target.h): the generator and
// compiled graphs see the op functionalization leaves.
std::string functional_spelling(const std::string& op);

// A matrix product, convolution or attention op ("addmm", "convolution.default",
// an overload or none): a chain may start after one (its epilogue), not
// include it.
bool is_gemm_or_conv(const std::string& op);

// Adds capture entry i (`e`) to the chain's ops, signatures and time.
void append_entry(Chain& ch, int i, const nlohmann::json& e);

// Whether a captured entry can be an op of a chain: a kernel that could be a
// target on `backend` (selection.h, inherent_reason), not a GEMM or convolution;
// or a cast (cast_dtype).
bool chain_op_eligible(const nlohmann::json& entry, const std::string& backend);

// The chains that are a module class's whole forward, whatever the shape of
// their data flow (MinGPT's GELU reads x in two branches that meet again),
// forward_chains.cpp. For each class in the module paths: the kernels that ran
// under its instances, all of their calls there, each one chain-eligible, fall
// into groups connected by data flow; each group is a chain when its ops have
// one call count, every output but the last op's is read by ops of the group
// alone, and every group has the same ops (one forward, several shapes).
// The ops are in an order of their data flow.
std::vector<Chain> find_forward_chains(const nlohmann::json& record, const std::string& backend);

// The chains of a capture record ({entries, flows, produced, traces}:
// rules/capture/capture.cpp) for a model on `backend`, longest time first.
// Ops that can be no target (selection.h, inherent_reason), views,
// allocations and GEMMs or convolutions (a chain starts after them: their
// epilogue) take no part. With a trace, links are judged call by call, so
// one entry (an op and signature) can sit in several chains: a ResNet's batch
// norm before a ReLU in one place and before a residual add in another; the
// calls of a chain are the runs of that exact sequence. Without one, from the
// flows aggregated by entry.
std::vector<Chain> find_chains(const nlohmann::json& record, const std::string& backend);

// {"model", "ops", "signatures", "calls", "time_us", "share", "module",
// "whole_forward", "searched", "why"}
// for the build report and `forge status`; share is of `op_time_us`.
nlohmann::json chain_json(const Chain& c, const std::string& model, double op_time_us);

}  // namespace forge
