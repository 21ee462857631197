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

// The storage types of x, weight/bias and mean/rstd, picked at run time.
__attribute__((noinline)) int group_norm_run(const GnArgs& a) {
  return with_float_type(a.x_dtype, [&](auto t) {
    return with_float_type(a.w_dtype, [&](auto tw) {
      return with_float_type(a.stat_dtype, [&](auto ts) {
        gn_rows<decltype(t), decltype(tw), decltype(ts)>(a);
        return 0;
      });
    });
  });
}

#include "../_common/cpu_checks.h"  // the ISA region ends; cpu_ok, host_contiguous, host_float, host_numel


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
  if (!x.data || !host_float(x.dtype) || x.ndim < 2 || !host_contiguous(x)) return 1;
  if (x.sizes[0] != N || x.sizes[1] != C || host_numel(x) != N * C * HW) return 1;
  if (!y.data || y.dtype != x.dtype || y.ndim != x.ndim || !host_contiguous(y)) return 1;
  for (int d = 0; d < x.ndim; ++d)
    if (y.sizes[d] != x.sizes[d]) return 1;
  int32_t w_dtype = x.dtype;
  const forge_tensor* wb[2] = {&w, &b};
  for (const forge_tensor* p : wb) {
    if (!p->data) continue;
    if (!host_float(p->dtype) || !host_contiguous(*p) || host_numel(*p) != C) return 1;
    w_dtype = p->dtype;
  }
  if (w.data && b.data && w.dtype != b.dtype) return 1;
  const forge_tensor* stats[2] = {&mean, &rstd};
  for (const forge_tensor* p : stats) {
    if (host_numel(*p) != N * G) return 1;
    if (N && (!p->data || !host_float(p->dtype) || !host_contiguous(*p))) return 1;
  }
  if (N && mean.dtype != rstd.dtype) return 1;
  if (!cpu_ok()) return 1;
  if (N == 0) return 0;
  if (HW == 0) return 1;  // empty groups: the stock kernel's NaN statistics, not worth a path
  GnArgs a{x.data, w.data, b.data, y.data, mean.data, rstd.data, x.dtype, w_dtype, mean.dtype, N, C, HW, G,
           static_cast<float>(call->scalars[4].f)};
  return group_norm_run(a);
}
