#include "../_common/batch_norm_args.h"  // the call's fields, shared with the CUDA templates

// alpha = invstd * w, beta = b - mean * alpha (one rounding), invstd =
// 1 / sqrt(var + eps): the stock CPU kernel's per-channel terms, in fp32.
template <class TP>
inline void channel_terms(const BnArgs& a, int64_t c, float& alpha, float& beta, float& invstd) {
  const TP* w = static_cast<const TP*>(a.w);
  const TP* b = static_cast<const TP*>(a.b);
  const float mean = to_f32(static_cast<const TP*>(a.rm)[c]);
  invstd = 1.0f / sqrtf(to_f32(static_cast<const TP*>(a.rv)[c]) + a.eps);
  alpha = w ? invstd * to_f32(w[c]) : invstd;
  beta = sfma(-mean, alpha, b ? to_f32(b[c]) : 0.0f);
}

// NCHW: channels in chunks of CH (their terms on the stack), then every
// sample's planes of the chunk in memory order.
template <class T, class TP>
void bn_nchw(const BnArgs& a) {
  const T* x = static_cast<const T*>(a.x);
  T* y = static_cast<T*>(a.y);
  float alpha[CH], beta[CH];
  for (int64_t c0 = 0; c0 < a.C; c0 += CH) {
    const int64_t nc = a.C - c0 < CH ? a.C - c0 : CH;
    for (int64_t k = 0; k < nc; ++k) {
      float invstd;
      channel_terms<TP>(a, c0 + k, alpha[k], beta[k], invstd);
    }
    for (int64_t n = 0; n < a.N; ++n)
      for (int64_t k = 0; k < nc; ++k) {
        const int64_t off = (n * a.C + c0 + k) * a.HW;
        apply_plane(x + off, y + off, a.HW, alpha[k], beta[k]);
      }
  }
  if constexpr (FORGE_P_STREAM) _mm_sfence();  // streamed planes are visible before the call returns
}
