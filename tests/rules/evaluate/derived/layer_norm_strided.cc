// native_layer_norm over the last dim of a 2-D input of any strides (a
// transposed view included): out, mean, rstd. float32.
#include <cmath>
#include "forge_kernel.h"
extern "C" int forge_kernel(const forge_call* call) {
  const forge_tensor& x = call->inputs[0];
  if (x.dtype != FORGE_FLOAT32 || x.ndim != 2 || call->n_outputs != 3) return 1;
  const forge_tensor& w = call->inputs[1];
  const forge_tensor& b = call->inputs[2];
  const double eps = call->scalars[1].f;
  const int64_t rows = x.sizes[0], cols = x.sizes[1];
  const int64_t s0 = x.strides[0], s1 = x.strides[1];
  const float* in = static_cast<const float*>(x.data);
  const float* wp = w.data ? static_cast<const float*>(w.data) : nullptr;
  const float* bp = b.data ? static_cast<const float*>(b.data) : nullptr;
  forge_tensor& o = call->outputs[0];
  float* out = static_cast<float*>(o.data);
  float* mean = static_cast<float*>(call->outputs[1].data);
  float* rstd = static_cast<float*>(call->outputs[2].data);
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0, ss = 0;
    for (int64_t c = 0; c < cols; ++c) s += in[r * s0 + c * s1];
    const double mu = s / cols;
    for (int64_t c = 0; c < cols; ++c) {
      const double d = in[r * s0 + c * s1] - mu;
      ss += d * d;
    }
    const double rs = 1.0 / std::sqrt(ss / cols + eps);
    for (int64_t c = 0; c < cols; ++c) {
      double v = (in[r * s0 + c * s1] - mu) * rs;
      if (wp) v *= wp[c];
      if (bp) v += bp[c];
      out[r * o.strides[0] + c * o.strides[1]] = static_cast<float>(v);
    }
    mean[r] = static_cast<float>(mu);
    rstd[r] = static_cast<float>(rs);
  }
  return 0;
}
