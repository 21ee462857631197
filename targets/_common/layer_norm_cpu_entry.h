// The storage types of x, weight/bias and mean/rstd, picked at run time.
__attribute__((noinline)) int layer_norm_run(const LnArgs& a) {
  return with_float_type(a.x_dtype, [&](auto t) {
    return with_float_type(a.w_dtype, [&](auto tw) {
      return with_float_type(a.stat_dtype, [&](auto ts) {
        ln_rows<decltype(t), decltype(tw), decltype(ts)>(a);
        return 0;
      });
    });
  });
}

#include "../_common/cpu_checks.h"  // the ISA region ends; cpu_ok, host_contiguous, host_float, host_numel


// native_layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight,
//                   Tensor? bias, float eps) -> (Tensor out, Tensor mean, Tensor rstd)
extern "C" int forge_kernel(const forge_call* call) {
  if (!call || call->n_inputs != 3 || call->n_outputs != 3 || call->n_scalars < 2) return 1;
  const forge_tensor& x = call->inputs[0];
  const forge_tensor& w = call->inputs[1];
  const forge_tensor& b = call->inputs[2];
  const forge_tensor& y = call->outputs[0];
  const forge_tensor& mean = call->outputs[1];
  const forge_tensor& rstd = call->outputs[2];
  const forge_scalar& shape = call->scalars[0];
  if (shape.kind != FORGE_ARG_INT_LIST || shape.len < 1 || shape.len > x.ndim) return 1;
  if (call->scalars[1].kind != FORGE_ARG_FLOAT) return 1;
  if (!x.data || !host_float(x.dtype) || !host_contiguous(x)) return 1;
  if (!y.data || y.dtype != x.dtype || y.ndim != x.ndim || !host_contiguous(y)) return 1;
  int64_t N = 1;
  for (int k = 0; k < shape.len; ++k) {
    if (shape.ints[k] != x.sizes[x.ndim - shape.len + k]) return 1;
    N *= shape.ints[k];
  }
  for (int d = 0; d < x.ndim; ++d)
    if (y.sizes[d] != x.sizes[d]) return 1;
  if (N == 0) return 1;
  if (FORGE_P_ROW && N != FORGE_P_ROW) return 1;
  const int64_t total = host_numel(x);
  const int64_t M = total / N;
  // weight and bias: None, or normalized_shape-sized contiguous tensors of one float dtype.
  int32_t w_dtype = x.dtype;
  const forge_tensor* wb[2] = {&w, &b};
  for (const forge_tensor* p : wb) {
    if (!p->data) continue;
    if (!host_float(p->dtype) || !host_contiguous(*p) || host_numel(*p) != N) return 1;
    w_dtype = p->dtype;
  }
  if (w.data && b.data && w.dtype != b.dtype) return 1;
  // mean and rstd: M elements each (shape input.shape[:axis] + [1]*k), one float dtype.
  const forge_tensor* stats[2] = {&mean, &rstd};
  for (const forge_tensor* p : stats) {
    if (host_numel(*p) != M) return 1;
    if (M && (!p->data || !host_float(p->dtype) || !host_contiguous(*p))) return 1;
  }
  if (M && mean.dtype != rstd.dtype) return 1;
  if (!cpu_ok()) return 1;
  if (total == 0) return 0;
  LnArgs a{x.data, w.data, b.data, y.data, mean.data, rstd.data, x.dtype, w_dtype, mean.dtype, M, N,
           static_cast<float>(call->scalars[1].f)};
  return layer_norm_run(a);
}
