struct GnArgs {
  const void* x;
  const void* w;
  const void* b;
  void* y;
  void* mean;
  void* rstd;
  int64_t N, C, HW, G;
  float eps;
  void* workspace;
};
