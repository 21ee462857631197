// A native_batch_norm call's fields in training mode, the same for the CPU
// and the CUDA templates (batch_norm_train_parse.h fills them).
struct BnTrainArgs {
  const void* x;
  const void* w;   // NULL: weight None (1)
  const void* b;   // NULL: bias None (0)
  const void* rm;  // running_mean; NULL: no running statistics (instance norm)
  const void* rv;  // running_var
  void* y;
  void* save_mean;    // [C]: the batch mean
  void* save_invstd;  // [C]: 1 / sqrt(biased variance + eps)
  void* new_rm;       // [C]: the call's new running_mean (the worker's extra output); NULL with rm
  void* new_rv;       // [C]: its new running_var (unbiased variance)
  int32_t x_dtype, p_dtype, s_dtype;  // p_dtype: weight/bias/running stats; s_dtype: save_*
  int64_t N, C, HW;
  double momentum, eps;
  bool cudnn;  // cudnn_batch_norm's call (a reserve output): its statistics of a non-finite channel differ
};
