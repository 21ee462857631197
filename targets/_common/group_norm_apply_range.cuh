// The affine pass of one contiguous range [j0, j1) of a (n, g) slice that
// starts at channel c0: y = fma(x, scale[c], bias[c]) with scale = rstd * w[c],
// bias = fma(-scale, mean, b[c]) - the stock CUDA kernel's arithmetic.
// VW elements at a time lie in one channel when HW % VW == 0 (VEC). A thread
// works in batches of U vectors, one block stride apart, all loaded before any
// is stored (U loads in flight); the caller loads the first batch itself
// (load_batch), so it can overlap those loads with its own latency.
// hw: division by HW (slice offsets are below 2^31: the strategies' applies).
// EVICT_FIRST: streaming stores of y (store_n). FORGE_EPILOGUE: a chain's tail
// after the affine pass (chain_epilogue.h).

#include "../_common/chain_epilogue.h"

// Batch at thread offset j: vectors j, j + step, ... below j1 (the rest unset).
template <class T, int VW, bool VEC, int U>
__device__ __forceinline__ void load_batch(const T* xs, int64_t j, int64_t j1, int64_t step, float (&v)[U][VW]) {
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int64_t ju = j + u * step;
    if (ju >= j1) break;
    if (VEC) load_n<T, VW>(xs + ju, v[u]);
    else v[u][0] = Io<T>::to(xs[ju]);
  }
}

template <class T, class TW, int VW, bool VEC, int U, bool EVICT_FIRST>
__device__ __forceinline__ void store_batch(T* ys, const TW* w, const TW* b, int64_t c0, DivU32 hw, int64_t j,
                                            int64_t j1, int64_t step, float mean, float rstd, float (&v)[U][VW]) {
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int64_t ju = j + u * step;
    if (ju >= j1) break;
    if (VEC) {
      const int64_t c = c0 + hw.div(static_cast<uint32_t>(ju));
      const float scale = w ? rstd * Io<TW>::to(w[c]) : rstd;
      const float bias = fmaf(-scale, mean, b ? Io<TW>::to(b[c]) : 0.0f);
#pragma unroll
      for (int e = 0; e < VW; ++e) v[u][e] = FORGE_EPILOGUE(fmaf(v[u][e], scale, bias));
      store_n<T, VW, EVICT_FIRST>(ys + ju, v[u]);
    } else {
      const int64_t c = c0 + hw.div(static_cast<uint32_t>(ju));
      const float scale = w ? rstd * Io<TW>::to(w[c]) : rstd;
      const float bias = fmaf(-scale, mean, b ? Io<TW>::to(b[c]) : 0.0f);
      ys[ju] = Io<T>::from(FORGE_EPILOGUE(fmaf(v[u][0], scale, bias)));
    }
  }
}

// The whole range; v holds the batch at j0 + threadIdx.x * VW (load_batch).
template <class T, class TW, int VW, bool VEC, int U, bool EVICT_FIRST = false>
__device__ __forceinline__ void apply_range(const T* xs, T* ys, const TW* w, const TW* b, int64_t c0, DivU32 hw,
                                            int64_t j0, int64_t j1, float mean, float rstd, int stride_threads,
                                            float (&v)[U][VW]) {
  const int64_t step = static_cast<int64_t>(stride_threads) * VW;
  for (int64_t j = j0 + static_cast<int64_t>(threadIdx.x) * VW; j < j1; j += step * U) {
    if (j != j0 + static_cast<int64_t>(threadIdx.x) * VW) load_batch<T, VW, VEC, U>(xs, j, j1, step, v);
    store_batch<T, TW, VW, VEC, U, EVICT_FIRST>(ys, w, b, c0, hw, j, j1, step, mean, rstd, v);
  }
}
