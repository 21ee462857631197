// A _fused_rms_norm call's fields, the same for the CPU and the CUDA
// templates (rms_norm_parse.h fills them): M rows of N elements.
struct RmsArgs {
  const void* x;
  const void* w;  // NULL: weight None
  void* y;
  void* rstd;
  int32_t x_dtype, w_dtype, s_dtype;  // w_dtype: x_dtype when weight is None
  int64_t M, N;
  float eps;
};
