// A native_layer_norm call on an input of any strides whose row (the
// normalized dims) steps through memory by one stride: M rows of N elements,
// the rows indexed by the outer dims (x's dims before the normalized ones).
// layer_norm_strided_parse.h fills it.
struct LnStrided {
  const void* x;
  const void* w;  // NULL: weight None
  const void* b;  // NULL: bias None
  void* y;
  void* mean;
  void* rstd;
  int32_t x_dtype, w_dtype, stat_dtype;  // w_dtype: x_dtype when both weight and bias are None
  int64_t M, N;
  float eps;
  int64_t xs, ys, ws, bs;  // the step from one row element to the next in x, out, weight, bias
  int outer;               // number of outer dims
  // Per outer dim: its extent, its stride in x and in out, and the step of the
  // row index (mean/rstd hold one value per row, row-major over the outer dims).
  int64_t size[FORGE_MAX_DIMS], xstride[FORGE_MAX_DIMS], ystride[FORGE_MAX_DIMS], mstride[FORGE_MAX_DIMS];
};
