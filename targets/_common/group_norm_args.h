// A native_group_norm call's fields, the same for the CPU and the CUDA
// templates (group_norm_parse.h fills them). workspace: CUDA only (the
// template's forge_workspace_bytes), NULL on the CPU.
struct GnArgs {
  const void* x;
  const void* w;  // NULL: weight None
  const void* b;  // NULL: bias None
  void* y;
  void* mean;
  void* rstd;
  int32_t x_dtype, w_dtype, stat_dtype;  // w_dtype: x_dtype when both weight and bias are None
  int64_t N, C, HW, G;
  float eps;
  void* workspace;
};
