// A native_layer_norm call's fields, the same for the CPU and the CUDA
// templates (layer_norm_parse.h fills them): M rows of N elements.
struct LnArgs {
  const void* x;
  const void* w;  // NULL: weight None
  const void* b;  // NULL: bias None
  void* y;
  void* mean;
  void* rstd;
  int32_t x_dtype, w_dtype, stat_dtype;  // w_dtype: x_dtype when both weight and bias are None
  int64_t M, N;
  float eps;
  void* workspace;  // CUDA templates that define LN_WORKSPACE (layer_norm_cuda_entry.cuh)
};
