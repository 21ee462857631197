// A softmax over any dim as [outer, L, inner] (softmax_columns_parse.h fills
// it), for the CPU and the CUDA columns templates.
struct SoftmaxColumns {
  const void* x;
  void* y;
  int32_t x_dtype, y_dtype;
  int64_t outer, L, inner;  // numel = outer * L * inner (0: nothing to do)
};
