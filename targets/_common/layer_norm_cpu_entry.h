template <class T, class TW>
int ln_stat_dispatch(const LnArgs& a) {
  switch (a.stat_dtype) {
    case FORGE_FLOAT32: ln_rows<T, TW, float>(a); return 0;
    case FORGE_BFLOAT16: ln_rows<T, TW, bf16>(a); return 0;
    case FORGE_FLOAT16: ln_rows<T, TW, f16>(a); return 0;
    default: return 1;
  }
}

template <class T>
int ln_w_dispatch(const LnArgs& a) {
  switch (a.w_dtype) {
    case FORGE_FLOAT32: return ln_stat_dispatch<T, float>(a);
    case FORGE_BFLOAT16: return ln_stat_dispatch<T, bf16>(a);
    case FORGE_FLOAT16: return ln_stat_dispatch<T, f16>(a);
    default: return 1;
  }
}

__attribute__((noinline)) int layer_norm_run(const LnArgs& a) {
  switch (a.x_dtype) {
    case FORGE_FLOAT32: return ln_w_dispatch<float>(a);
    case FORGE_BFLOAT16: return ln_w_dispatch<bf16>(a);
    case FORGE_FLOAT16: return ln_w_dispatch<f16>(a);
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
int64_t numel_of(const forge_tensor& t) {
  int64_t n = 1;
  for (int d = 0; d < t.ndim; ++d) n *= t.sizes[d];
  return n;
}
}  // namespace

// native_layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight,
//                   Tensor? bias, float eps) -> (Tensor out, Tensor mean, Tensor rstd)
extern "C" int forge_kernel(const forge_call* call) {
  if (!call || call->n_inputs != 3 || call->n_outputs != 3 || call->n_scalars < 2) return 1;
  const forge_tensor& x = call->inputs[0];
  const forge_tensor& w = call->inputs[1];
  const forge_tensor& b = call->inputs[2];
  const forge_tensor& y = call->outputs[0];
  const forge_tensor& mean = call->outputs[1];
  const forge_tensor& rstd = call->outputs[2];
  const forge_scalar& shape = call->scalars[0];
  if (shape.kind != FORGE_ARG_INT_LIST || shape.len < 1 || shape.len > x.ndim) return 1;
  if (call->scalars[1].kind != FORGE_ARG_FLOAT) return 1;
  if (!x.data || !float_dtype(x.dtype) || !is_contiguous(x)) return 1;
  if (!y.data || y.dtype != x.dtype || y.ndim != x.ndim || !is_contiguous(y)) return 1;
  int64_t N = 1;
  for (int k = 0; k < shape.len; ++k) {
    if (shape.ints[k] != x.sizes[x.ndim - shape.len + k]) return 1;
    N *= shape.ints[k];
  }
  for (int d = 0; d < x.ndim; ++d)
    if (y.sizes[d] != x.sizes[d]) return 1;
  if (N == 0) return 1;
  if (FORGE_P_ROW && N != FORGE_P_ROW) return 1;
  const int64_t total = numel_of(x);
  const int64_t M = total / N;
  // weight and bias: None, or normalized_shape-sized contiguous tensors of one float dtype.
  int32_t w_dtype = x.dtype;
  const forge_tensor* wb[2] = {&w, &b};
  for (const forge_tensor* p : wb) {
    if (!p->data) continue;
    if (!float_dtype(p->dtype) || !is_contiguous(*p) || numel_of(*p) != N) return 1;
    w_dtype = p->dtype;
  }
  if (w.data && b.data && w.dtype != b.dtype) return 1;
  // mean and rstd: M elements each (shape input.shape[:axis] + [1]*k), one float dtype.
  const forge_tensor* stats[2] = {&mean, &rstd};
  for (const forge_tensor* p : stats) {
    if (numel_of(*p) != M) return 1;
    if (M && (!p->data || !float_dtype(p->dtype) || !is_contiguous(*p))) return 1;
  }
  if (M && mean.dtype != rstd.dtype) return 1;
  if (!cpu_ok()) return 1;
  if (total == 0) return 0;
  LnArgs a{x.data, w.data, b.data, y.data, mean.data, rstd.data, x.dtype, w_dtype, mean.dtype, M, N,
           static_cast<float>(call->scalars[1].f)};
  return layer_norm_run(a);
}
