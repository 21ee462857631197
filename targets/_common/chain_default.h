// The chain a targets/chain template computes when compiled alone (forge
// replaces the FORGE_CHAIN line before it with the generated chain, which
// defines CHAIN_INPUTS): y = silu(x) * x on 4096 elements.
#ifndef CHAIN_INPUTS
#define CHAIN_INPUTS 1
#define CHAIN_Y CHAIN_F32
#define CHAIN_Y_DTYPE FORGE_FLOAT32
constexpr int64_t kChainNumel = 4096;
#define CHAIN_INPUT_LIST(X) X(0, CHAIN_F32, FORGE_FLOAT32, CHAIN_FULL, 1, 4096, 1, 1)
template <class V>
PW_FN V chain_body(const V* in) {
  const PwScalars none{0.0f, 0.0f, 0.0f, 0, 0, 0};
  const V t0 = pw_op_unary<PW_silu>(in[0], none);
  return pw_op_binary<PW_mul>(t0, in[0], none);
}
inline bool chain_shapes_ok(const forge_call* call) {
  static const int64_t want[] = {4096};
  return chain_sizes_are(call->outputs[0], want, 1) && chain_sizes_are(call->inputs[0], want, 1);
}
#endif
