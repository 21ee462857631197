/* The mean and rstd of one contiguous row of N elements, for layer_norm's CPU
 * templates (two_pass, strided; one_read takes FLUSH and rstd_of): the mean,
 * then the centered sum of squares, each gathered in double so the error does
 * not grow with the row (one fp32 sum per lane gives hundreds of ulps of the
 * mean at a few thousand elements, where the stock kernel's cascade gives a
 * few); x - mean in fp32, as the stock kernel. U independent accumulators; N is FORGE_P_ROW when that is
 * nonzero (a compile-time trip count). NaN propagates to the row's rstd.
 * Needs cpu_common.h (vf, load, load_part) and FORGE_P_ROW. */
#include "../_common/cpu_double_lanes.h"  // vd, widen, narrow, dsum: inlined when forge loads the template

// rstd = 1 / sqrt(max(var, 0) + eps), NaN kept (the clamp would drop it).
inline float rstd_of(float var, float eps) {
  const float r = 1.0f / sqrtf((var > 0.0f ? var : 0.0f) + eps);
  return var != var ? var : r;
}

// fp32 partial sums over FLUSH vector steps per accumulator, then gathered in
// double: the inner loops stay fp32 (1.7x the speed of double lanes on AVX2)
// while no partial grows beyond FLUSH terms.
constexpr int64_t FLUSH = 16;

// The sum over x[0..N) of f(vector of x), in double; the tail's dead lanes add 0.
template <int U, class T, class F>
inline double flushed_sum(const T* x, int64_t N, F f) {
  const int64_t full = N - N % (U * W);
  vd t{};
  int64_t i = 0;
  while (i < full) {
    vf s[U];
    for (int u = 0; u < U; ++u) s[u] = splat(0.0f);
    const int64_t end = i + FLUSH * U * W < full ? i + FLUSH * U * W : full;
    for (; i < end; i += U * W)
      for (int u = 0; u < U; ++u) s[u] += f(load(x + i + u * W));
    for (int u = 0; u < U; ++u) t += widen(s[u]);
  }
  vf r = splat(0.0f);
  for (; i + W <= N; i += W) r += f(load(x + i));
  if (i < N) r += iota() < static_cast<int32_t>(N - i) ? f(load_part(x + i, N - i, T{})) : splat(0.0f);
  return dsum(t + widen(r));
}

template <int U, class T>
inline void row_moments(const T* x, int64_t n_runtime, float eps, float& mean, float& rstd) {
  const int64_t N = FORGE_P_ROW ? FORGE_P_ROW : n_runtime;
  mean = static_cast<float>(flushed_sum<U>(x, N, [](vf v) { return v; }) / static_cast<double>(N));
  const vf mv = splat(mean);
  const double q = flushed_sum<U>(x, N, [mv](vf v) {
    const vf d = v - mv;
    return d * d;
  });
  rstd = rstd_of(static_cast<float>(q / static_cast<double>(N)), eps);
}
