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
