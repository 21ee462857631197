// A native_batch_norm call's fields (eval mode), the same for the CPU and the
// CUDA templates (batch_norm_parse.h fills them).
struct BnArgs {
  const void* x;
  const void* w;   // NULL: weight None (1)
  const void* b;   // NULL: bias None (0)
  const void* rm;  // running_mean
  const void* rv;  // running_var
  void* y;
  void* save_mean;    // NULL when the caller's save_mean has no elements (CPU eval)
  void* save_invstd;  // likewise
  int32_t x_dtype, p_dtype, s_dtype;  // s_dtype: x_dtype when save_* are empty (CPU eval)
  int64_t N, C, HW, numel;
  bool channels_last;  // the memory is channels-last (the channel fastest), not also NCHW
  float eps;
};
