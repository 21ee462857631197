// The built-in strategy library (targets/<family>/strategies.yaml): for each op
// family, parameterized kernel templates. "Strategy S with params P" is the
// template's source with `#define FORGE_P_<NAME> <value>` lines put in front
// (the templates keep defaults under #ifndef), so an instance is plain source,
// content-addressed like any candidate.
//
// `applies:` is matched here on what the signature says for sure (input dtype,
// output dtype, layout: contiguous, or strided with rows of one stride); every
// template checks its full assumptions again at run time and returns nonzero
// outside them, which verification counts as a failure.
#pragma once

#include <filesystem>
#include <map>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/mcts.h"
#include "engine/target.h"
#include "rules/evaluate/family.h"

namespace forge {

struct Strategy {
  std::string name;
  std::string backend;  // cpu | cuda
  std::filesystem::path source;
  std::string text;       // the template
  nlohmann::json params;  // {NAME: [values...]} in file order
  nlohmann::json applies;
  // `capacity: {row: CLUSTER*BLOCK*CHUNKS*$vec}`: the largest row an instance
  // handles, as a product of its params, integers and $vec (elements of the
  // input's dtype in 16 bytes where the row is a whole number of 16-byte
  // vectors in the input and the output, else 1: the templates' scalar path). An instance whose product is below the
  // signature's fact declines every call, so the proposer never proposes it
  // (and a strategy none of whose instances fits does not apply).
  std::map<std::string, std::vector<std::string>> capacity;
  std::string note;
};

// A template file's text with its `#include "../_common/NAME"` lines replaced
// by those files (one self-contained source). Throws forge::Error naming the
// file and line.
std::string load_template(const std::filesystem::path& source);

// Strategies of `family` (beside its family.yaml). Throws forge::Error naming the
// file for a malformed library.
std::vector<Strategy> load_strategies(const Family& family);

// Does `s` apply to `target` on `backend`? (unmet_conditions is empty)
bool strategy_applies(const Strategy& s, const Target& target, const std::string& backend);

// The conditions of `s` (its backend, then `applies:`) that `target` on
// `backend` does not meet, each in words with the signature's value:
// "row in [1, 4096] (here 46080)". `distance`, when given, gets how far off
// they are together (a range: log2 of the ratio outside it; others: 8 each).
std::vector<std::string> unmet_conditions(const Strategy& s, const Target& target, const std::string& backend,
                                          double* distance = nullptr);

// The strategy of `backend` nearest to applying to `target`: fewest unmet
// conditions, then the smallest distance, then file order. nullopt when
// `strategies` has none for `backend`. `strategy` points into `strategies`.
struct NearestStrategy {
  const Strategy* strategy = nullptr;
  std::vector<std::string> unmet;
};
std::optional<NearestStrategy> nearest_strategy(const std::vector<Strategy>& strategies, const Target& target,
                                                const std::string& backend);


// Shape facts of a target that `applies` conditions and "$row" params use:
// row = the reduced row (softmax's dim, normalized_shape's product, mean's H·W),
// plane = H·W (batch_norm, mean over trailing dims), slice = (C/group)·HxW and
// groups = N·group (group_norm). Unset when the op has no such fact.
struct SignatureFacts {
  std::optional<int64_t> row, plane, slice, groups;
  bool dim_last = false;         // softmax over the last dim (applies: {dim: last}; another: {dim: not_last})
  // layer_norm, rms_norm: the row's dims (normalized_shape's, in the input and
  // in weight/bias) step through memory by one stride, whatever the outer
  // dims' strides (applies: {layout: strided_rows}).
  bool row_one_stride = false;
  bool reduce_trailing = false;  // mean over the trailing dims
  std::optional<bool> training;  // batch_norm
  // The op as a kernel computes it: in-place forms name their out-of-place op
  // ("add_.Tensor" -> "add.Tensor", "relu_" -> "relu"); applies: {op: [...]}
  // matches it. `op_name` drops the overload ("add"): a "$op" param's value.
  std::string op, op_name;
  // FORGE_DTYPES (runtime/abi/forge_kernel.h): 1 << code of every float
  // tensor's dtype among the arguments and outputs; 0 when the first input's
  // or the first output's is unknown (every type).
  unsigned dtypes = 0;
  int in_bytes = 0, out_bytes = 0;  // the first input's and output's element sizes (capacity's $vec), 0 unknown
};
SignatureFacts signature_facts(const Target& target);

// Every parameter combination of `s`, first values first; params nest by
// name (the first name outermost, the last varies fastest).
std::vector<nlohmann::json> param_grid(const Strategy& s);
// Does the instance of `s` with `params` hold the signature's facts within its
// `capacity`? (true without a capacity, or without the fact)
bool fits_capacity(const Strategy& s, const nlohmann::json& params, const SignatureFacts& facts);
// The first of param_grid(s) that fits_capacity (nullopt: none does).
std::optional<nlohmann::json> first_fitting(const Strategy& s, const SignatureFacts& facts);
// The parameter sets one step away from `params`: one parameter moved to the
// value before or after it in its list (the proposer's refinements of a node),
// those within the capacity for `facts`.
std::vector<nlohmann::json> param_neighbours(const Strategy& s, const nlohmann::json& params,
                                             const SignatureFacts& facts = {});

// The source of strategy `s` instantiated with `params`: "$row" and "$op"
// values become the signature's row length and op name (`facts`).
std::string instantiate(const Strategy& s, const nlohmann::json& params,
                        const SignatureFacts& facts = {});

// Proposes strategy actions: at the root, each applicable strategy's first
// parameter set that fits the signature (`facts`, capacity), then the rest of
// every grid that fits; under a node, the fitting parameter sets one step away
// from the node's (one parameter changed), so the tree refines. Never proposes
// an action that is anywhere in the tree already.
class StrategyProposer : public mcts::Proposer {
 public:
  explicit StrategyProposer(std::vector<Strategy> strategies, SignatureFacts facts = {})
      : m_strategies(std::move(strategies)), m_facts(std::move(facts)) {}
  std::vector<mcts::Action> actions(const mcts::Tree& tree, mcts::NodeId parent,
                                    mcts::Rng& rng) override;
  const std::vector<Strategy>& strategies() const { return m_strategies; }

 private:
  std::vector<Strategy> m_strategies;
  SignatureFacts m_facts;
};

}  // namespace forge
