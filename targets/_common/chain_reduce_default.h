// The chain a targets/chain reduce_pointwise template computes when compiled
// alone (forge replaces the FORGE_CHAIN line before it with the generated
// chain, which defines CHAIN_INPUTS): y = x / sum(x, 1) on [8, 512].
#ifndef CHAIN_INPUTS
#define CHAIN_INPUTS 1
#define CHAIN_Y CHAIN_F32
#define CHAIN_Y_DTYPE FORGE_FLOAT32
constexpr int64_t kChainNumel = 4096;
#define CHAIN_INPUT_LIST(X) X(0, CHAIN_F32, FORGE_FLOAT32, CHAIN_FULL, 1, 4096, 1, 1)
#define CHAIN_RED_KIND 0
constexpr int64_t kRedOuter = 8, kRedN = 512, kRedInner = 1;
template <class V> PW_FN V chain_pre(const V* in) { return in[0]; }
template <class V> PW_FN V chain_finish(V acc) { return acc; }
template <class V> PW_FN V chain_out(const V* in, V r) { return in[0] / r; }
inline bool chain_shapes_ok(const forge_call*) { return true; }
#endif
