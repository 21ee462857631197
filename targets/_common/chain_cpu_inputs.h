// A fused chain's inputs on the CPU (targets/chain, CPU templates, inside
// their ISA region): their pointers and Python numbers (ChainPtrs), lanes j ..
// j+m-1 of input k as generated (chain_checks.h: CHAIN_FULL / CHAIN_BCAST /
// CHAIN_VALUE), and CHAIN_CHECK, which checks input k of the call and fills `p`.
struct ChainPtrs {
  const void* in[CHAIN_INPUTS];
  float value[CHAIN_INPUTS];
  void* y;
};

// Lanes j .. j+m-1 (m <= W) of input k; lanes past m repeat the first.
template <int K, class T, int MODE>
inline vf chain_lanes(const ChainPtrs& p, int64_t j, int64_t m, int64_t inner, int64_t n, int64_t inner2, int64_t n2) {
  if constexpr (MODE == CHAIN_VALUE) {
    return splat(p.value[K]);
  } else {
    const T* x = static_cast<const T*>(p.in[K]);
    if constexpr (MODE == CHAIN_FULL) {
      return m == W ? load(x + j) : load_part(x + j, m, x[j]);
    } else if (n == 1 && n2 == 1) {
      return splat(to_f32(x[0]));
    } else if (n2 == 1 && inner > 1 && j / inner == (j + m - 1) / inner) {  // one element for all lanes (a channel's)
      return splat(to_f32(x[(j / inner) % n]));
    } else if (inner == 1 && j % n + m <= n) {  // the lanes are neighbours in the input too
      const T* at = x + chain_bcast_index(j, inner, n, inner2, n2);
      return m == W ? load(at) : load_part(at, m, at[0]);
    } else {
      T tmp[W];
      for (int k = 0; k < W; ++k) tmp[k] = x[chain_bcast_index(j + (k < m ? k : 0), inner, n, inner2, n2)];
      return load(tmp);
    }
  }
}

#define CHAIN_CHECK(k, T, DT, MODE, INNER, NN, INNER2, NN2)                                                         \
  if (!chain_input_ok(call->inputs[k], DT, MODE, (NN) * (NN2), kChainNumel, &p.value[k], [](const void*) { return true; })) \
    return 1;                                                                                          \
  p.in[k] = call->inputs[k].data;

