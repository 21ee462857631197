// An nll_loss_forward call as the templates run it (nll_loss_parse.h fills it).
struct NllArgs {
  const void* x;
  const int64_t* t;
  void* y;
  void* total;
  int32_t dtype;
  int64_t N, C, ignore;
  int32_t mean;  // reduction 1: the sum over the total weight
  int32_t one_row;  // self [C] with a 0-dim target
};
