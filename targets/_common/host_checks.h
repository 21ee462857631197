inline bool host_contiguous(const forge_tensor& t) {
  int64_t expect = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    if (t.sizes[d] != 1 && t.strides[d] != expect) return false;
    expect *= t.sizes[d];
  }
  return true;
}
inline int64_t host_numel(const forge_tensor& t) {
  int64_t n = 1;
  for (int d = 0; d < t.ndim; ++d) n *= t.sizes[d];
  return n;
}
inline bool host_float(int32_t d) { return d == FORGE_FLOAT32 || d == FORGE_FLOAT16 || d == FORGE_BFLOAT16; }
// The row length of a norm over `shape` (normalized_shape: an int list naming
// x's trailing dims): their product, or -1 when the list does not match them.
inline int64_t host_row_length(const forge_tensor& x, const forge_scalar& shape) {
  if (shape.kind != FORGE_ARG_INT_LIST || shape.len < 1 || shape.len > x.ndim) return -1;
  int64_t n = 1;
  for (int k = 0; k < shape.len; ++k) {
    if (shape.ints[k] != x.sizes[x.ndim - shape.len + k]) return -1;
    n *= shape.ints[k];
  }
  return n;
}
// `out` has the sizes of `x`, its dtype, and is contiguous like it.
inline bool host_same_contiguous(const forge_tensor& out, const forge_tensor& x) {
  if (!out.data || out.dtype != x.dtype || out.ndim != x.ndim || !host_contiguous(out)) return false;
  for (int d = 0; d < x.ndim; ++d)
    if (out.sizes[d] != x.sizes[d]) return false;
  return true;
}
// A norm's weight and bias: each absent or `n` contiguous elements of a float
// dtype, both of one dtype. *w_dtype: theirs (x_dtype when both are absent).
inline bool host_affine_ok(const forge_tensor& w, const forge_tensor& b, int64_t n, int32_t x_dtype,
                           int32_t* w_dtype) {
  *w_dtype = x_dtype;
  const forge_tensor* wb[2] = {&w, &b};
  for (const forge_tensor* p : wb) {
    if (!p->data) continue;
    if (!host_float(p->dtype) || !host_contiguous(*p) || host_numel(*p) != n) return false;
    *w_dtype = p->dtype;
  }
  return !(w.data && b.data && w.dtype != b.dtype);
}
// A norm's mean and rstd outputs: `m` elements each; when m > 0, contiguous,
// of one float dtype.
inline bool host_stats_ok(const forge_tensor& mean, const forge_tensor& rstd, int64_t m) {
  const forge_tensor* stats[2] = {&mean, &rstd};
  for (const forge_tensor* p : stats) {
    if (host_numel(*p) != m) return false;
    if (m && (!p->data || !host_float(p->dtype) || !host_contiguous(*p))) return false;
  }
  return !(m && mean.dtype != rstd.dtype);
}
