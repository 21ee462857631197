// A fused chain's inputs on the GPU (targets/chain, CUDA templates): their
// pointers and Python numbers (ChainPtrs), element j of input k as generated
// (chain_checks.h: CHAIN_FULL / CHAIN_BCAST / CHAIN_VALUE), N elements from i,
// and CHAIN_CHECK, which checks input k of the call and fills `p`.
namespace {

struct ChainPtrs {
  const void* in[CHAIN_INPUTS];
  float value[CHAIN_INPUTS];
  void* y;
};

// Element j of input k.
template <int K, class T, int MODE>
__device__ __forceinline__ float chain_in(const ChainPtrs& p, int64_t j, int64_t inner, int64_t n, int64_t inner2,
                                          int64_t n2) {
  if constexpr (MODE == CHAIN_VALUE) return p.value[K];
  else if constexpr (MODE == CHAIN_FULL) return Io<T>::to(static_cast<const T*>(p.in[K])[j]);
  else return Io<T>::to(static_cast<const T*>(p.in[K])[chain_bcast_index(j, inner, n, inner2, n2)]);
}

// N elements from i of input k: one access for a full-size input when N > 1
// (the host checked the alignment).
template <int K, class T, int MODE, int N>
__device__ __forceinline__ void chain_in_n(const ChainPtrs& p, int64_t i, int64_t inner, int64_t n, int64_t inner2,
                                           int64_t n2, float (&v)[N]) {
  if constexpr (MODE == CHAIN_FULL && N > 1) {
    load_n<T, N>(static_cast<const T*>(p.in[K]) + i, v);
  } else {
#pragma unroll
    for (int e = 0; e < N; ++e) v[e] = chain_in<K, T, MODE>(p, i + e, inner, n, inner2, n2);
  }
}

#define CHAIN_CHECK(k, T, DT, MODE, INNER, NN, INNER2, NN2)                                                               \
  if (!chain_input_ok(call->inputs[k], DT, MODE, (NN) * (NN2), kChainNumel, &p.value[k], host_readable)) return 1; \
  p.in[k] = call->inputs[k].data;

}  // namespace
