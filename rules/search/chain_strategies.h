// The strategy library's kernels for a chain target (Target::chain,
// rules/capture/chain_target.h): a group norm followed by pointwise ops runs
// in the group_norm family's templates with the rest as their epilogue
// (head_definition), an RMSNorm spelled as ops in the rms_norm family's
// (rms_definition); one reduction over one dim (sum, mean, 2-norm, amax,
// keepdim) among pointwise ops in targets/chain/'s reduce_pointwise templates
// (reduce_definition); when every op of the chain is one the
// pointwise table computes (targets/_common/pointwise_ops.h: relu ... exp,
// add/sub/mul/div.Tensor), a fused pass generated from the chain's definition
// into targets/chain/'s templates, for the CPU and for CUDA. The generated
// part names each op with its captured constants (alpha, slope, exponent...)
// and how each input is indexed (the output's size, broadcast along one span
// of dims, or a float64 Python number); the kernel checks all of it again at
// run time and declines anything else.
#pragma once

#include <string>
#include <vector>

#include "engine/target.h"
#include "rules/search/strategies.h"

namespace forge {

struct ChainStrategies {
  std::vector<Strategy> strategies;  // one per backend; empty when `why` says why not
  std::string why;
};
ChainStrategies chain_strategies(const Target& t);

// The generated part alone (what replaces the templates' FORGE_CHAIN line),
// or "" with *why.
std::string chain_definition(const Target& t, std::string* why);

// A chain headed by native_group_norm whose other ops are the pointwise
// table's, each on the previous one's result (group norm -> SiLU): the text
// that makes a group_norm template compute the chain (FORGE_CHAIN_HEAD, the
// captured sizes and eps as CHAIN_GN_*, chain_epilogue<V> applied before each
// store: targets/_common/chain_epilogue.h), or "" with *why.
std::string head_definition(const Target& t, std::string* why);

// Pointwise ops of the table (batch norms in eval mode among them) before a
// native_group_norm or native_layer_norm that reads the last of them, and
// pointwise ops after it (conv -> add bias -> sigmoid -> GroupNorm; a
// post-norm transformer's residual add -> LayerNorm); or such a norm first
// whose ops after it read other tensors (GroupNorm -> minimum(x, a tensor) ->
// add bias), which head_definition's epilogue cannot: the text that makes
// targets/chain/'s group_norm_prologue templates compute it (chain_prologue
// on each element as it is read, the norm's sizes and eps as CHAIN_GN_*, a
// layer norm as one group of the row's elements, its weight and bias read as
// they broadcast, a group norm's per channel; chain_finish before each store),
// or "" with *why ("no group or layer norm" when the chain has none).
std::string norm_definition(const Target& t, std::string* why);

// An RMSNorm spelled as ops, as Hugging Face's float32 RMSNorm modules run it:
// pow(x, 2) -> mean(-1, keepdim) -> add(eps, a Python number) -> rsqrt ->
// mul(x, .) -> mul(weight, .), either operand order, x one input of the chain
// (rules/capture/chain_target.h). The text that makes an rms_norm template
// compute it (FORGE_CHAIN_RMS, the row as CHAIN_RMS_N), *row the row's length;
// or "" with *why.
std::string rms_definition(const Target& t, int64_t* row, std::string* why);

// One reduction (sum.dim_IntList, mean.dim, linalg_vector_norm or
// norm.ScalarOpt_dim of order 2, amax) over one dim of a tensor of the
// output's shape, keepdim, no dtype, every other op the pointwise table's
// (x / mean(|x|, 1), x / sqrt(mean(x^2, 1) + eps)): the text that makes a
// reduce_pointwise template compute it (chain_pre, chain_finish, chain_out,
// the output as [kRedOuter, kRedN, kRedInner]), or "" with *why ("no
// reduction" when the chain has none).
std::string reduce_definition(const Target& t, std::string* why);

}  // namespace forge
