// group_norm -> SiLU fused (a chain target's kernel): inputs x [N,C,H,W], weight
// [C], bias [C], float32, contiguous; 4 groups, eps 1e-5 as the model captured;
// outputs[0] = silu(group_norm(x)). Statistics in double, as stock's CPU kernel.
#include <cmath>
#include "forge_kernel.h"
extern "C" int forge_kernel(const forge_call* call) {
  if (call->n_inputs != 3 || call->n_outputs != 1) return 1;
  const forge_tensor& x = call->inputs[0];
  const forge_tensor& w = call->inputs[1];
  const forge_tensor& b = call->inputs[2];
  forge_tensor& y = call->outputs[0];
  if (x.ndim < 2 || x.dtype != FORGE_FLOAT32 || y.dtype != FORGE_FLOAT32) return 1;
  const int64_t groups = 4;
  const double eps = 1e-5;
  const int64_t n = x.sizes[0], c = x.sizes[1];
  int64_t hw = 1;
  for (int d = 2; d < x.ndim; ++d) hw *= x.sizes[d];
  if (c % groups != 0) return 1;
  const int64_t cg = c / groups;
  const float* in = static_cast<const float*>(x.data);
  const float* wt = static_cast<const float*>(w.data);
  const float* bs = static_cast<const float*>(b.data);
  float* out = static_cast<float*>(y.data);
  for (int64_t i = 0; i < n * groups; ++i) {
    const float* p = in + i * cg * hw;
    double sum = 0, sq = 0;
    for (int64_t k = 0; k < cg * hw; ++k) sum += p[k], sq += static_cast<double>(p[k]) * p[k];
    const double mean = sum / static_cast<double>(cg * hw);
    const double var = sq / static_cast<double>(cg * hw) - mean * mean;
    const double rstd = 1.0 / std::sqrt((var < 0 ? 0 : var) + eps);  // NaN (an inf input) stays NaN, as stock
    for (int64_t ch = 0; ch < cg; ++ch) {
      const int64_t cc = (i % groups) * cg + ch;
      const float scale = static_cast<float>(rstd) * wt[cc];
      const float shift = bs[cc] - static_cast<float>(mean * rstd) * wt[cc];
      for (int64_t k = 0; k < hw; ++k) {
        const float v = p[ch * hw + k] * scale + shift;
        out[i * cg * hw + ch * hw + k] = v / (1.0f + std::exp(-v));
      }
    }
  }
  return 0;
}
