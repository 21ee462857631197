// HONEST: native_group_norm on float32 NCHW, batch from the call's N scalar:
// per (n, g) mean and variance in double, then the stock kernel's affine
// (scale = rstd * w, bias = fma(-scale, mean, b), y = fma(x, scale, bias)).
// Accepted, with the family's edge cases (other batch sizes) run, not skipped.
#include <cmath>
#include <cstdint>

#include "forge_kernel.h"

extern "C" int forge_kernel(const forge_call* call) {
  if (call->n_inputs != 3 || call->n_outputs != 3 || call->n_scalars < 5) return 1;
  if (call->inputs[0].dtype != FORGE_FLOAT32) return 1;
  const int64_t N = call->scalars[0].i, C = call->scalars[1].i, HW = call->scalars[2].i, G = call->scalars[3].i;
  const double eps = call->scalars[4].f;
  const float* x = static_cast<const float*>(call->inputs[0].data);
  const float* w = static_cast<const float*>(call->inputs[1].data);
  const float* b = static_cast<const float*>(call->inputs[2].data);
  float* y = static_cast<float*>(call->outputs[0].data);
  float* mean = static_cast<float*>(call->outputs[1].data);
  float* rstd = static_cast<float*>(call->outputs[2].data);
  const int64_t D = C / G, cnt = D * HW;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t g = 0; g < G; ++g) {
      const int64_t base = (n * C + g * D) * HW;
      double s = 0, v = 0;
      for (int64_t j = 0; j < cnt; ++j) s += x[base + j];
      const double m = s / cnt;
      for (int64_t j = 0; j < cnt; ++j) v += (x[base + j] - m) * (x[base + j] - m);
      const float mf = static_cast<float>(m), rf = static_cast<float>(1.0 / std::sqrt(v / cnt + eps));
      mean[n * G + g] = mf;
      rstd[n * G + g] = rf;
      for (int64_t c = 0; c < D; ++c) {
        const float scale = rf * (w ? w[g * D + c] : 1.0f);
        const float bias = std::fma(-scale, mf, b ? b[g * D + c] : 0.0f);
        for (int64_t j = 0; j < HW; ++j) y[base + c * HW + j] = std::fma(x[base + c * HW + j], scale, bias);
      }
    }
  return 0;
}
