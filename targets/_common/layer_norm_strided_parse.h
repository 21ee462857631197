// native_layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight,
//                   Tensor? bias, float eps) -> (Tensor out, Tensor mean, Tensor rstd)
// Checks a call against what the strided layer_norm templates assume and
// fills `a`: 0 when usable. input and out of one float dtype and one shape,
// any outer strides, the normalized dims of each stepping by one stride
// (host_one_stride); weight and bias absent or N elements of one float dtype
// stepping by one stride; mean and rstd M contiguous elements of one float
// dtype. Host code (after the ISA region). Internal linkage.
namespace {
// The stride by which dims [first, ndim) of `t` run through memory as one
// flattened sequence (dims of extent 1 take any stride; all-zero strides are
// a broadcast row); false when they do not (a permutation inside them).
inline bool host_one_stride(const forge_tensor& t, int first, int64_t* stride) {
  int64_t step = 1, next = 0;
  bool seen = false;
  for (int d = t.ndim - 1; d >= first; --d) {
    if (t.sizes[d] == 1) continue;
    if (!seen) step = t.strides[d], seen = true;
    else if (t.strides[d] != next) return false;
    next = t.strides[d] * t.sizes[d];
  }
  *stride = step;
  return true;
}

// weight or bias: absent, or n elements of a float dtype in one stride.
inline bool host_affine_strided(const forge_tensor& t, int64_t n, int64_t* stride) {
  *stride = 0;
  if (!t.data) return true;
  return host_float(t.dtype) && host_numel(t) == n && host_one_stride(t, 0, stride);
}

inline int parse_layer_norm_strided(const forge_call* call, LnStrided& a) {
  if (!call || call->n_inputs != 3 || call->n_outputs != 3 || call->n_scalars < 2) return 1;
  const forge_tensor& x = call->inputs[0];
  const forge_tensor& w = call->inputs[1];
  const forge_tensor& b = call->inputs[2];
  const forge_tensor& y = call->outputs[0];
  if (call->scalars[1].kind != FORGE_ARG_FLOAT) return 1;
  if (!x.data || !host_float(x.dtype) || !y.data || y.dtype != x.dtype || y.ndim != x.ndim) return 1;
  for (int d = 0; d < x.ndim; ++d)
    if (y.sizes[d] != x.sizes[d]) return 1;
  const int64_t N = host_row_length(x, call->scalars[0]);
  if (N <= 0) return 1;
  const int outer = x.ndim - call->scalars[0].len;
  LnStrided s{};
  if (!host_one_stride(x, outer, &s.xs) || !host_one_stride(y, outer, &s.ys)) return 1;
  if (!host_affine_strided(w, N, &s.ws) || !host_affine_strided(b, N, &s.bs)) return 1;
  if (w.data && b.data && w.dtype != b.dtype) return 1;
  s.M = host_numel(x) / N;
  if (!host_stats_ok(call->outputs[1], call->outputs[2], s.M)) return 1;
  s.x = x.data, s.w = w.data, s.b = b.data, s.y = y.data;
  s.mean = call->outputs[1].data, s.rstd = call->outputs[2].data;
  s.x_dtype = x.dtype;
  s.w_dtype = w.data ? w.dtype : b.data ? b.dtype : x.dtype;
  s.stat_dtype = call->outputs[1].dtype;
  s.N = N;
  s.eps = static_cast<float>(call->scalars[1].f);
  s.outer = outer;
  int64_t rows = 1;
  for (int d = outer - 1; d >= 0; --d) {
    s.size[d] = x.sizes[d], s.xstride[d] = x.strides[d], s.ystride[d] = y.strides[d];
    s.mstride[d] = rows;
    rows *= x.sizes[d];
  }
  a = s;
  return 0;
}
}  // namespace
