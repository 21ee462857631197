// A pooling call (targets/pool's op table) as [planes, D, H, W]:
//   max_pool{2,3}d_with_indices, max_pool1d(self, int[n] kernel_size,
//       int[n] stride (empty: the kernel), int[n] padding, int[n] dilation, bool ceil_mode)
//   avg_pool{2,3}d(self, int[n] kernel_size, int[n] stride, int[n] padding,
//       bool ceil_mode, bool count_include_pad, int? divisor_override)
// Each list has n entries or one for all. The input [N, C, spatial...] or
// [C, spatial...], contiguous and non-empty; the outputs contiguous, of the
// shape stock gives (checked against the output-size rule), values in the
// input's dtype, indices int64. Shared by the CPU and the CUDA templates.
// Host code: the CPU templates include it after their ISA region.

namespace {

// ATen's pooling_output_shape: the last window starts inside the input (or its left padding).
inline int64_t pool_out_size(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dil, bool ceil) {
  const int64_t num = in + 2 * pad - dil * (k - 1) - 1 + (ceil ? stride - 1 : 0);
  int64_t out = (num >= 0 ? num / stride : -((-num + stride - 1) / stride)) + 1;
  if (ceil && (out - 1) * stride >= in + pad) --out;
  return out;
}

// The i-th of n entries of an int list (one entry: all of them); false if malformed.
inline bool pool_list(const forge_scalar& s, int n, int i, int64_t fallback, int64_t& v) {
  if (s.kind != FORGE_ARG_INT_LIST || s.len < 0 || s.len > FORGE_MAX_LIST) return false;
  if (s.len == 0) {
    v = fallback;
    return fallback > 0;
  }
  if (s.len != 1 && s.len != n) return false;
  v = s.ints[s.len == 1 ? 0 : i];
  return true;
}

inline int parse_pool(const forge_call* call, PoolArgs& a) {
  constexpr int n = PL_SPATIAL;
  constexpr int ns = PL_MAX ? 5 : 6;
  constexpr int n_out = PL_INDICES ? 2 : 1;
  if (!call || call->n_inputs != 1 || call->n_scalars != ns || call->n_outputs != n_out) return 1;
  const forge_tensor& x = call->inputs[0];
  const forge_scalar* s = call->scalars;
  if (!x.data || (x.ndim != n + 1 && x.ndim != n + 2) || !host_float(x.dtype) || !host_contiguous(x)) return 1;
  if (host_numel(x) == 0) return 1;
  // ceil_mode: scalar 4 (max) or 3 (avg).
  const forge_scalar& ceil = s[PL_MAX ? 4 : 3];
  if (ceil.kind != FORGE_ARG_BOOL) return 1;
  int64_t in[3] = {1, 1, 1}, k[3] = {1, 1, 1}, st[3] = {1, 1, 1}, pad[3] = {0, 0, 0}, dil[3] = {1, 1, 1},
          out[3] = {1, 1, 1};
  const int lead = x.ndim - n;
  a.planes = 1;
  for (int d = 0; d < lead; ++d) a.planes *= x.sizes[d];
  for (int i = 0; i < n; ++i) {
    const int j = 3 - n + i;  // spatial dims fill [D, H, W] from the right
    in[j] = x.sizes[lead + i];
    if (!pool_list(s[0], n, i, 0, k[j]) || !pool_list(s[1], n, i, k[j], st[j]) || !pool_list(s[2], n, i, 0, pad[j]))
      return 1;
    if (PL_MAX && !pool_list(s[3], n, i, 1, dil[j])) return 1;
    if (k[j] <= 0 || st[j] <= 0 || dil[j] <= 0 || pad[j] < 0 || pad[j] > k[j] / 2) return 1;
    // The window arithmetic is int32: every window end and the window's size fit.
    if (k[j] > (1 << 20) || st[j] > (1 << 30) || dil[j] > (1 << 10)) return 1;
    if (in[j] + pad[j] + (k[j] - 1) * dil[j] + 1 >= (int64_t{1} << 31)) return 1;
    out[j] = pool_out_size(in[j], k[j], pad[j], st[j], dil[j], ceil.i != 0);
    if (out[j] <= 0) return 1;
  }
  if (in[0] * in[1] * in[2] >= (int64_t{1} << 31) || out[0] * out[1] * out[2] >= (int64_t{1} << 31)) return 1;
  if (k[0] * k[1] * k[2] >= (int64_t{1} << 31)) return 1;
  a.count_include_pad = 1;
  a.divisor = 0;
#if !PL_MAX
  if (s[4].kind != FORGE_ARG_BOOL) return 1;
  a.count_include_pad = s[4].i != 0;
  if (s[5].kind == FORGE_ARG_INT) {
    if (s[5].i == 0 || s[5].i > INT32_MAX || s[5].i < INT32_MIN) return 1;
    a.divisor = static_cast<int32_t>(s[5].i);
  } else if (s[5].kind != FORGE_ARG_NONE) {
    return 1;
  }
#endif
  // The outputs: the input's leading dims, then the output extents.
  auto out_ok = [&](const forge_tensor& o) {
    if (!o.data || o.ndim != x.ndim || !host_contiguous(o)) return false;
    for (int d = 0; d < lead; ++d)
      if (o.sizes[d] != x.sizes[d]) return false;
    for (int i = 0; i < n; ++i)
      if (o.sizes[lead + i] != out[3 - n + i]) return false;
    return true;
  };
  if (!out_ok(call->outputs[0]) || call->outputs[0].dtype != x.dtype) return 1;
  a.idx = nullptr;
#if PL_INDICES
  if (!out_ok(call->outputs[1]) || call->outputs[1].dtype != FORGE_INT64) return 1;
  a.idx = static_cast<int64_t*>(call->outputs[1].data);
#endif
  a.x = x.data;
  a.y = call->outputs[0].data;
  a.x_dtype = x.dtype;
  a.y_dtype = call->outputs[0].dtype;
  a.D = static_cast<int32_t>(in[0]), a.H = static_cast<int32_t>(in[1]), a.W = static_cast<int32_t>(in[2]);
  a.OD = static_cast<int32_t>(out[0]), a.OH = static_cast<int32_t>(out[1]), a.OW = static_cast<int32_t>(out[2]);
  a.kD = static_cast<int32_t>(k[0]), a.kH = static_cast<int32_t>(k[1]), a.kW = static_cast<int32_t>(k[2]);
  a.sD = static_cast<int32_t>(st[0]), a.sH = static_cast<int32_t>(st[1]), a.sW = static_cast<int32_t>(st[2]);
  a.pD = static_cast<int32_t>(pad[0]), a.pH = static_cast<int32_t>(pad[1]), a.pW = static_cast<int32_t>(pad[2]);
  a.dD = static_cast<int32_t>(dil[0]), a.dH = static_cast<int32_t>(dil[1]), a.dW = static_cast<int32_t>(dil[2]);
  return 0;
}

}  // namespace
