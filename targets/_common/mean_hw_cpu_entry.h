template <class T>
int mean_out_dispatch(int32_t out_dtype, const void* x, void* y, int64_t planes, int64_t hw) {
  switch (out_dtype) {
    case FORGE_FLOAT32: mean_planes(static_cast<const T*>(x), static_cast<float*>(y), planes, hw); return 0;
    case FORGE_BFLOAT16: mean_planes(static_cast<const T*>(x), static_cast<bf16*>(y), planes, hw); return 0;
    case FORGE_FLOAT16: mean_planes(static_cast<const T*>(x), static_cast<f16*>(y), planes, hw); return 0;
    default: return 1;
  }
}

__attribute__((noinline)) int mean_run(int32_t in_dtype, int32_t out_dtype, const void* x, void* y, int64_t planes,
                                       int64_t hw) {
  switch (in_dtype) {
    case FORGE_FLOAT32: return mean_out_dispatch<float>(out_dtype, x, y, planes, hw);
    case FORGE_BFLOAT16: return mean_out_dispatch<bf16>(out_dtype, x, y, planes, hw);
    case FORGE_FLOAT16: return mean_out_dispatch<f16>(out_dtype, x, y, planes, hw);
    default: return 1;
  }
}

}  // namespace

#if FORGE_P_ISA != 0
#pragma GCC pop_options
#endif

namespace {
// The ISA the compute code was compiled for is present on this CPU.
bool cpu_ok() {
#if FORGE_P_ISA == 3
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
#elif FORGE_P_ISA == 2
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
#else
  return true;
#endif
}

bool is_contiguous(const forge_tensor& t) {
  int64_t expect = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    if (t.sizes[d] != 1 && t.strides[d] != expect) return false;
    expect *= t.sizes[d];
  }
  return true;
}
}  // namespace

namespace {
bool float_dtype(int32_t d) { return d == FORGE_FLOAT32 || d == FORGE_BFLOAT16 || d == FORGE_FLOAT16; }
}  // namespace

// mean.dim(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor
extern "C" int forge_kernel(const forge_call* call) {
  if (!call || call->n_inputs != 1 || call->n_outputs != 1 || call->n_scalars < 1) return 1;
  const forge_tensor& x = call->inputs[0];
  const forge_tensor& y = call->outputs[0];
  if (!x.data || !y.data || x.ndim < 1 || !float_dtype(x.dtype) || !float_dtype(y.dtype)) return 1;
  if (!is_contiguous(x) || !is_contiguous(y)) return 1;
  // The reduced dims must be exactly the trailing k dims (None or [] = all).
  bool reduced[FORGE_MAX_DIMS] = {};
  int k = 0;
  const forge_scalar& dim = call->scalars[0];
  if (dim.kind == FORGE_ARG_NONE || (dim.kind == FORGE_ARG_INT_LIST && dim.len == 0)) {
    for (int d = 0; d < x.ndim; ++d) reduced[d] = true;
    k = x.ndim;
  } else if (dim.kind == FORGE_ARG_INT_LIST) {
    for (int j = 0; j < dim.len; ++j) {
      int64_t d = dim.ints[j] < 0 ? dim.ints[j] + x.ndim : dim.ints[j];
      if (d < 0 || d >= x.ndim || reduced[d]) return 1;
      reduced[d] = true;
      ++k;
    }
  } else {
    return 1;
  }
  for (int d = 0; d < x.ndim; ++d)
    if (reduced[d] != (d >= x.ndim - k)) return 1;
  int64_t planes = 1, hw = 1, out_numel = 1;
  for (int d = 0; d < x.ndim; ++d) (reduced[d] ? hw : planes) *= x.sizes[d];
  for (int d = 0; d < y.ndim; ++d) out_numel *= y.sizes[d];
  if (out_numel != planes) return 1;
  if (FORGE_P_ROW && hw != FORGE_P_ROW) return 1;
  if (!cpu_ok()) return 1;
  if (planes == 0) return 0;
  if (hw == 0) return 1;  // the mean of nothing: NaN in the stock kernel, not worth a path
  return mean_run(x.dtype, y.dtype, x.data, y.data, planes, hw);
}
