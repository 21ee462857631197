template <class TI>
int dispatch_out(int32_t out_dtype, const void* x, void* y, int64_t rows, int64_t L) {
  switch (out_dtype) {
    case FORGE_FLOAT32: softmax_rows<TI, float>(x, y, rows, L); return 0;
    case FORGE_BFLOAT16: softmax_rows<TI, bf16>(x, y, rows, L); return 0;
    case FORGE_FLOAT16: softmax_rows<TI, f16>(x, y, rows, L); return 0;
    default: return 1;
  }
}

__attribute__((noinline)) int softmax_dispatch(int32_t in_dtype, int32_t out_dtype, const void* x, void* y,
                                               int64_t rows, int64_t L) {
  switch (in_dtype) {
    case FORGE_FLOAT32: return dispatch_out<float>(out_dtype, x, y, rows, L);
    case FORGE_BFLOAT16: return dispatch_out<bf16>(out_dtype, x, y, rows, L);
    case FORGE_FLOAT16: return dispatch_out<f16>(out_dtype, x, y, rows, L);
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

extern "C" int forge_kernel(const forge_call* call) {
  if (!call || call->n_inputs != 1 || call->n_outputs != 1 || call->n_scalars < 2) return 1;
  const forge_tensor& x = call->inputs[0];
  const forge_tensor& y = call->outputs[0];
  if (!x.data || !y.data || x.ndim < 1 || x.ndim != y.ndim) return 1;
  if (call->scalars[0].kind != FORGE_ARG_INT) return 1;
  int64_t dim = call->scalars[0].i;
  if (dim < 0) dim += x.ndim;
  if (dim != x.ndim - 1) return 1;
  int64_t numel = 1;
  for (int d = 0; d < x.ndim; ++d) {
    if (x.sizes[d] != y.sizes[d]) return 1;
    numel *= x.sizes[d];
  }
  if (!is_contiguous(x) || !is_contiguous(y)) return 1;
  if (!cpu_ok()) return 1;
  if (numel == 0) return 0;
  const int64_t L = x.sizes[x.ndim - 1];
  return softmax_dispatch(x.dtype, y.dtype, x.data, y.data, numel / L, L);
}
