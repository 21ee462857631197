// A targets/chain template's call checked against what forge generated the
// kernel for (chain_checks.h: the output, every input's dtype, mode and exact
// sizes) and its tensors bound into p (CHAIN_CHECK, chain_cpu_inputs.h or
// chain_cuda_inputs.cuh): 0, or 1 where the kernel declines the call.
namespace {
inline int chain_bind(const forge_call* call, ChainPtrs& p) {
  if (!call || call->n_inputs != CHAIN_INPUTS || !chain_output_ok(call, CHAIN_Y_DTYPE, kChainNumel) ||
      !chain_shapes_ok(call))
    return 1;
  CHAIN_INPUT_LIST(CHAIN_CHECK)
  p.y = call->outputs[0].data;
  return 0;
}
}  // namespace
