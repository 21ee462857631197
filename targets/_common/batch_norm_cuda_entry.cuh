inline bool channels_last_layout(const forge_tensor& t) {
  if (t.ndim < 3) return false;
  const int64_t C = t.sizes[1];
  if (C != 1 && t.strides[1] != 1) return false;
  int64_t expect = C;
  for (int d = t.ndim - 1; d >= 2; --d) {
    if (t.sizes[d] != 1 && t.strides[d] != expect) return false;
    expect *= t.sizes[d];
  }
  return t.sizes[0] == 1 || t.strides[0] == expect;
}

template <class T>
int dispatch_p(const BnArgs& a, int32_t x_dtype, int32_t p_dtype, int32_t s_dtype, cudaStream_t stream) {
  if (p_dtype == x_dtype) {
    if (s_dtype == FORGE_FLOAT32) return launch<T, T, float>(a, stream);
    if (s_dtype == x_dtype) return launch<T, T, T>(a, stream);
  } else if (p_dtype == FORGE_FLOAT32) {
    if (s_dtype == FORGE_FLOAT32) return launch<T, float, float>(a, stream);
    if (s_dtype == x_dtype) return launch<T, float, T>(a, stream);
  }
  return 1;
}

}  // namespace

// native_batch_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor? running_mean,
//                   Tensor? running_var, bool training, float momentum, float eps)
//   -> (Tensor out, Tensor save_mean, Tensor save_invstd)      (training=False only)
extern "C" int forge_kernel(const forge_call* call) {
  if (!call || call->n_inputs != 5 || call->n_outputs != 3 || call->n_scalars < 3) return 1;
  const forge_tensor& x = call->inputs[0];
  const forge_tensor& w = call->inputs[1];
  const forge_tensor& b = call->inputs[2];
  const forge_tensor& rm = call->inputs[3];
  const forge_tensor& rv = call->inputs[4];
  const forge_tensor& y = call->outputs[0];
  const forge_tensor& sm = call->outputs[1];
  const forge_tensor& si = call->outputs[2];
  if (call->scalars[0].kind != FORGE_ARG_BOOL || call->scalars[0].i != 0) return 1;  // eval mode only
  if (call->scalars[2].kind != FORGE_ARG_FLOAT) return 1;
  if (!x.data || x.ndim < 2 || !host_float(x.dtype)) return 1;
  if (!y.data || y.ndim != x.ndim || y.dtype != x.dtype) return 1;
  for (int d = 0; d < x.ndim; ++d)
    if (y.sizes[d] != x.sizes[d] || (x.sizes[d] != 1 && y.strides[d] != x.strides[d])) return 1;
  const int64_t N = x.sizes[0], C = x.sizes[1], numel = host_numel(x);
  const int64_t HW = N * C ? numel / (N * C) : 0;
  const bool nchw = host_contiguous(x);
  const bool cl = channels_last_layout(x);
  if (!nchw && !(ACCEPT_CHANNELS_LAST && cl)) return 1;
  if (!rm.data || !rv.data) return 1;
  const forge_tensor* params[4] = {&w, &b, &rm, &rv};
  for (const forge_tensor* p : params) {
    if (!p->data) continue;
    if (p->dtype != rm.dtype || !host_float(p->dtype) || host_numel(*p) != C || !host_contiguous(*p)) return 1;
  }
  const int64_t ns = host_numel(sm);
  if (host_numel(si) != ns || (ns != 0 && ns != C)) return 1;
  if (ns && (!sm.data || !si.data || sm.dtype != si.dtype || !host_float(sm.dtype) || !host_contiguous(sm) ||
             !host_contiguous(si)))
    return 1;
  if (numel == 0) return 0;
  BnArgs a{x.data, w.data, b.data, rm.data, rv.data, y.data, ns ? sm.data : nullptr, ns ? si.data : nullptr,
           N, C, HW, numel, !nchw, static_cast<float>(call->scalars[2].f)};
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  return with_dtype(x.dtype, [&](auto t) {
    using T = decltype(t);
    return dispatch_p<T>(a, x.dtype, rm.dtype, ns ? sm.dtype : FORGE_FLOAT32, stream);
  });
}
