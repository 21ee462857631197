template <class T>
int dispatch_w(const GnArgs& a, int32_t x_dtype, int32_t w_dtype, int32_t s_dtype, cudaStream_t stream) {
  if (w_dtype == x_dtype) {
    if (s_dtype == x_dtype) return launch<T, T, T>(a, stream);
    if (s_dtype == FORGE_FLOAT32) return launch<T, T, float>(a, stream);
  } else if (w_dtype == FORGE_FLOAT32) {
    if (s_dtype == x_dtype) return launch<T, float, T>(a, stream);
    if (s_dtype == FORGE_FLOAT32) return launch<T, float, float>(a, stream);
  }
  return 1;
}

// Parses and checks the call; fills `a` and the dtypes. 0 when usable.
int parse(const forge_call* call, GnArgs& a, int32_t& w_dtype, int32_t& s_dtype) {
  if (!call || call->n_inputs != 3 || call->n_outputs != 3 || call->n_scalars < 5) return 1;
  const forge_tensor& x = call->inputs[0];
  const forge_tensor& w = call->inputs[1];
  const forge_tensor& b = call->inputs[2];
  const forge_tensor& y = call->outputs[0];
  const forge_tensor& mean = call->outputs[1];
  const forge_tensor& rstd = call->outputs[2];
  for (int k = 0; k < 4; ++k)
    if (call->scalars[k].kind != FORGE_ARG_INT) return 1;
  if (call->scalars[4].kind != FORGE_ARG_FLOAT) return 1;
  const int64_t N = call->scalars[0].i, C = call->scalars[1].i, HW = call->scalars[2].i, G = call->scalars[3].i;
  if (N < 0 || C < 1 || HW < 1 || G < 1 || C % G != 0) return 1;
  if (!x.data || !host_float(x.dtype) || x.ndim < 2 || !host_contiguous(x)) return 1;
  if (x.sizes[0] != N || x.sizes[1] != C || host_numel(x) != N * C * HW) return 1;
  if (!y.data || y.dtype != x.dtype || y.ndim != x.ndim || !host_contiguous(y)) return 1;
  for (int d = 0; d < x.ndim; ++d)
    if (y.sizes[d] != x.sizes[d]) return 1;
  w_dtype = x.dtype;
  const forge_tensor* wb[2] = {&w, &b};
  for (const forge_tensor* p : wb) {
    if (!p->data) continue;
    if (!host_float(p->dtype) || !host_contiguous(*p) || host_numel(*p) != C) return 1;
    w_dtype = p->dtype;
  }
  if (w.data && b.data && w.dtype != b.dtype) return 1;
  const forge_tensor* stats[2] = {&mean, &rstd};
  for (const forge_tensor* p : stats) {
    if (host_numel(*p) != N * G) return 1;
    if (N && (!p->data || !host_float(p->dtype) || !host_contiguous(*p))) return 1;
  }
  if (N && mean.dtype != rstd.dtype) return 1;
  s_dtype = mean.dtype;
  a = GnArgs{x.data, w.data, b.data, y.data, mean.data, rstd.data, N, C, HW, G,
             static_cast<float>(call->scalars[4].f), nullptr};
  return 0;
}

}  // namespace

