// forge_kernel of a targets/chain CPU template (after cpu_checks.h): the call
// checked against what forge generated the kernel for (chain_checks.h: the
// output, every input's dtype, mode and exact sizes), the inputs into
// ChainPtrs, then the template's chain_run(p).
extern "C" int forge_kernel(const forge_call* call) {
  if (!call || call->n_inputs != CHAIN_INPUTS || !chain_output_ok(call, CHAIN_Y_DTYPE, kChainNumel) || !cpu_ok() ||
      !chain_shapes_ok(call))
    return 1;
  ChainPtrs p{};
  CHAIN_INPUT_LIST(CHAIN_CHECK)
  p.y = call->outputs[0].data;
  if (kChainNumel == 0) return 0;
  return chain_run(p);
}
