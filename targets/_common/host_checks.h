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
