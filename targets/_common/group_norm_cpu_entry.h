// y = fma(x, scale, bias) over one channel's HxW plane.
template <class T>
inline void apply_plane(const T* x, T* y, int64_t hw, float scale, float bias) {
  const vf sv = splat(scale), bv = splat(bias);
  int64_t i = 0;
  for (; i + 2 * W <= hw; i += 2 * W) {
    store(y + i, vfma(load(x + i), sv, bv));
    store(y + i + W, vfma(load(x + i + W), sv, bv));
  }
  for (; i + W <= hw; i += W) store(y + i, vfma(load(x + i), sv, bv));
  if (i < hw) store_part(y + i, vfma(load_part(x + i, hw - i, T{}), sv, bv), hw - i);
}

struct GnArgs {
  const void* x;
  const void* w;  // NULL: weight None
  const void* b;  // NULL: bias None
  void* y;
  void* mean;
  void* rstd;
  int32_t x_dtype, w_dtype, stat_dtype;
  int64_t N, C, HW, G;
  float eps;
};

template <class T, class TW, class TS>
void gn_rows(const GnArgs& a) {
  const T* x = static_cast<const T*>(a.x);
  T* y = static_cast<T*>(a.y);
  const TW* w = static_cast<const TW*>(a.w);
  const TW* b = static_cast<const TW*>(a.b);
  TS* mean_out = static_cast<TS*>(a.mean);
  TS* rstd_out = static_cast<TS*>(a.rstd);
  const int64_t D = a.C / a.G;
  for (int64_t n = 0; n < a.N; ++n)
    for (int64_t g = 0; g < a.G; ++g) {
      const int64_t c0 = g * D;
      const int64_t off = (n * a.C + c0) * a.HW;
      float mean, rstd;
      slice_moments(x + off, D * a.HW, a.eps, mean, rstd);
      store1(mean_out + n * a.G + g, mean);
      store1(rstd_out + n * a.G + g, rstd);
      for (int64_t c = c0; c < c0 + D; ++c) {
        const float scale = w ? rstd * to_f32(w[c]) : rstd;
        const float bias = sfma(-scale, mean, b ? to_f32(b[c]) : 0.0f);
        apply_plane(x + (n * a.C + c) * a.HW, y + (n * a.C + c) * a.HW, a.HW, scale, bias);
      }
    }
}

template <class T, class TW>
int gn_stat_dispatch(const GnArgs& a) {
  switch (a.stat_dtype) {
    case FORGE_FLOAT32: gn_rows<T, TW, float>(a); return 0;
    case FORGE_BFLOAT16: gn_rows<T, TW, bf16>(a); return 0;
    case FORGE_FLOAT16: gn_rows<T, TW, f16>(a); return 0;
    default: return 1;
  }
}

template <class T>
int gn_w_dispatch(const GnArgs& a) {
  switch (a.w_dtype) {
    case FORGE_FLOAT32: return gn_stat_dispatch<T, float>(a);
    case FORGE_BFLOAT16: return gn_stat_dispatch<T, bf16>(a);
    case FORGE_FLOAT16: return gn_stat_dispatch<T, f16>(a);
    default: return 1;
  }
}

__attribute__((noinline)) int group_norm_run(const GnArgs& a) {
  switch (a.x_dtype) {
    case FORGE_FLOAT32: return gn_w_dispatch<float>(a);
    case FORGE_BFLOAT16: return gn_w_dispatch<bf16>(a);
    case FORGE_FLOAT16: return gn_w_dispatch<f16>(a);
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

// native_group_norm(Tensor input, Tensor? weight, Tensor? bias, SymInt N, SymInt C,
//                   SymInt HxW, int group, float eps) -> (Tensor out, Tensor mean, Tensor rstd)
extern "C" int forge_kernel(const forge_call* call) {
  if (!call || call->n_inputs != 3 || call->n_outputs != 3 || call->n_scalars < 5) return 1;
  const forge_tensor& x = call->inputs[0];
  const forge_tensor& w = call->inputs[1];
  const forge_tensor& b = call->inputs[2];
  const forge_tensor& y = call->outputs[0];
  const forge_tensor& mean = call->outputs[1];
  const forge_tensor& rstd = call->outputs[2];
  for (int k = 0; k < 4; ++k)
    if (call->scalars[k].kind != FORGE_ARG_INT) return 1;
  if (call->scalars[4].kind != FORGE_ARG_FLOAT) return 1;
  const int64_t N = call->scalars[0].i, C = call->scalars[1].i, HW = call->scalars[2].i, G = call->scalars[3].i;
  if (N < 0 || C < 1 || HW < 0 || G < 1 || C % G != 0) return 1;
  if (!x.data || !float_dtype(x.dtype) || x.ndim < 2 || !is_contiguous(x)) return 1;
  if (x.sizes[0] != N || x.sizes[1] != C || numel_of(x) != N * C * HW) return 1;
  if (!y.data || y.dtype != x.dtype || y.ndim != x.ndim || !is_contiguous(y)) return 1;
  for (int d = 0; d < x.ndim; ++d)
    if (y.sizes[d] != x.sizes[d]) return 1;
  int32_t w_dtype = x.dtype;
  const forge_tensor* wb[2] = {&w, &b};
  for (const forge_tensor* p : wb) {
    if (!p->data) continue;
    if (!float_dtype(p->dtype) || !is_contiguous(*p) || numel_of(*p) != C) return 1;
    w_dtype = p->dtype;
  }
  if (w.data && b.data && w.dtype != b.dtype) return 1;
  const forge_tensor* stats[2] = {&mean, &rstd};
  for (const forge_tensor* p : stats) {
    if (numel_of(*p) != N * G) return 1;
    if (N && (!p->data || !float_dtype(p->dtype) || !is_contiguous(*p))) return 1;
  }
  if (N && mean.dtype != rstd.dtype) return 1;
  if (!cpu_ok()) return 1;
  if (N == 0) return 0;
  if (HW == 0) return 1;  // empty groups: the stock kernel's NaN statistics, not worth a path
  GnArgs a{x.data, w.data, b.data, y.data, mean.data, rstd.data, x.dtype, w_dtype, mean.dtype, N, C, HW, G,
           static_cast<float>(call->scalars[4].f)};
  return group_norm_run(a);
}
