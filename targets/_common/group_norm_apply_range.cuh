// The affine pass of one contiguous range [j0, j1) of a (n, g) slice that
// starts at channel c0: y = fma(x, scale[c], bias[c]) with scale = rstd * w[c],
// bias = fma(-scale, mean, b[c]) - the stock CUDA kernel's arithmetic.
// VW elements at a time lie in one channel when HW % VW == 0 (VEC).
template <class T, class TW, int VW, bool VEC>
__device__ __forceinline__ void apply_range(const T* xs, T* ys, const TW* w, const TW* b, int64_t c0, int64_t HW,
                                            int64_t j0, int64_t j1, float mean, float rstd, int stride_threads) {
  for (int64_t j = j0 + static_cast<int64_t>(threadIdx.x) * VW; j < j1; j += static_cast<int64_t>(stride_threads) * VW) {
    if (VEC) {
      const int64_t c = c0 + j / HW;
      const float scale = w ? rstd * Io<TW>::to(w[c]) : rstd;
      const float bias = fmaf(-scale, mean, b ? Io<TW>::to(b[c]) : 0.0f);
      float v[VW];
      load_n<T, VW>(xs + j, v);
#pragma unroll
      for (int e = 0; e < VW; ++e) v[e] = fmaf(v[e], scale, bias);
      store_n<T, VW>(ys + j, v);
    } else {
#pragma unroll
      for (int e = 0; e < VW; ++e) {
        if (j + e >= j1) break;
        const int64_t c = c0 + (j + e) / HW;
        const float scale = w ? rstd * Io<TW>::to(w[c]) : rstd;
        const float bias = fmaf(-scale, mean, b ? Io<TW>::to(b[c]) : 0.0f);
        ys[j + e] = Io<T>::from(fmaf(Io<T>::to(xs[j + e]), scale, bias));
      }
    }
  }
}
