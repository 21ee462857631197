// CHEAT: work on a side "stream". The CPU analogue of launching on a stream the
// timer does not watch: return at once and let a detached thread compute the
// result after the clock stopped. Rejected by the static check: "thread".
// (Were it to get past, the worker counts the process's threads around the
// call: "side_stream".)
#include <cmath>
#include <cstdint>
#include <thread>

#include "forge_kernel.h"

extern "C" int forge_kernel(const forge_call* call) {
  const forge_tensor& x = call->inputs[0];
  const int64_t cols = x.sizes[x.ndim - 1];
  int64_t rows = 1;
  for (int d = 0; d + 1 < x.ndim; ++d) rows *= x.sizes[d];
  const float* in = static_cast<const float*>(x.data);
  float* out = static_cast<float*>(call->outputs[0].data);
  std::thread([=] {
    for (int64_t r = 0; r < rows; ++r) {
      float m = -INFINITY, sum = 0;
      for (int64_t c = 0; c < cols; ++c) m = in[r * cols + c] > m ? in[r * cols + c] : m;
      for (int64_t c = 0; c < cols; ++c) sum += (out[r * cols + c] = std::exp(in[r * cols + c] - m));
      for (int64_t c = 0; c < cols; ++c) out[r * cols + c] /= sum;
    }
  }).detach();
  return 0;
}
