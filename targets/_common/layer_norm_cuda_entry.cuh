// Dispatch over (x dtype) x (weight dtype: x's or float32) x (stat dtype:
// float32 or x's).
template <class T>
int dispatch_w(const LnArgs& a, int32_t x_dtype, int32_t w_dtype, int32_t s_dtype, cudaStream_t stream) {
  if (w_dtype == x_dtype) {
    if (s_dtype == FORGE_FLOAT32) return launch<T, T, float>(a, stream);
    if (s_dtype == x_dtype) return launch<T, T, T>(a, stream);
  } else if (w_dtype == FORGE_FLOAT32) {
    if (s_dtype == FORGE_FLOAT32) return launch<T, float, float>(a, stream);
    if (s_dtype == x_dtype) return launch<T, float, T>(a, stream);
  }
  return 1;
}

}  // namespace

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
  for (int d = 0; d < x.ndim; ++d)
    if (y.sizes[d] != x.sizes[d]) return 1;
  int64_t N = 1;
  for (int k = 0; k < shape.len; ++k) {
    if (shape.ints[k] != x.sizes[x.ndim - shape.len + k]) return 1;
    N *= shape.ints[k];
  }
  if (N == 0) return 1;
  const int64_t M = host_numel(x) / N;
  int32_t w_dtype = x.dtype;
  const forge_tensor* wb[2] = {&w, &b};
  for (const forge_tensor* p : wb) {
    if (!p->data) continue;
    if (!host_float(p->dtype) || !host_contiguous(*p) || host_numel(*p) != N) return 1;
    w_dtype = p->dtype;
  }
  if (w.data && b.data && w.dtype != b.dtype) return 1;
  const forge_tensor* stats[2] = {&mean, &rstd};
  for (const forge_tensor* p : stats) {
    if (host_numel(*p) != M) return 1;
    if (M && (!p->data || !host_float(p->dtype) || !host_contiguous(*p))) return 1;
  }
  if (M == 0) return 0;
  if (mean.dtype != rstd.dtype) return 1;
  if (!row_fits(N)) return 1;
  LnArgs a{x.data, w.data, b.data, y.data, mean.data, rstd.data, M, N, static_cast<float>(call->scalars[1].f)};
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  return with_dtype(x.dtype, [&](auto t) {
    using T = decltype(t);
    return dispatch_w<T>(a, x.dtype, w_dtype, mean.dtype, stream);
  });
}
