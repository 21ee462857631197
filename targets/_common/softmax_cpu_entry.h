// The storage types of x and the output, picked at run time.
__attribute__((noinline)) int softmax_dispatch(int32_t in_dtype, int32_t out_dtype, const void* x, void* y,
                                               int64_t rows, int64_t L) {
  return with_float_type(in_dtype, [&](auto ti) {
    return with_float_type(out_dtype, [&](auto to) {
      softmax_rows<decltype(ti), decltype(to)>(x, y, rows, L);
      return 0;
    });
  });
}

#include "../_common/cpu_checks.h"  // the ISA region ends; cpu_ok, host_contiguous, host_float, host_numel

extern "C" int forge_kernel(const forge_call* call) {
  if (!call || call->n_inputs != 1 || call->n_outputs != 1 || call->n_scalars < 2) return 1;
  const forge_tensor& x = call->inputs[0];
  const forge_tensor& y = call->outputs[0];
  if (!x.data || !y.data || x.ndim < 1 || x.ndim != y.ndim) return 1;
  if (call->scalars[0].kind != FORGE_ARG_INT) return 1;
  int64_t dim = call->scalars[0].i;
  if (dim < 0) dim += x.ndim;
  if (dim != x.ndim - 1) return 1;
  int64_t numel = 1;
  for (int d = 0; d < x.ndim; ++d) {
    if (x.sizes[d] != y.sizes[d]) return 1;
    numel *= x.sizes[d];
  }
  if (!host_contiguous(x) || !host_contiguous(y)) return 1;
  if (!cpu_ok()) return 1;
  if (numel == 0) return 0;
  const int64_t L = x.sizes[x.ndim - 1];
  return softmax_dispatch(x.dtype, y.dtype, x.data, y.data, numel / L, L);
}
