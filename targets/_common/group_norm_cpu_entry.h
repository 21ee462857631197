#include "../_common/group_norm_args.h"  // the call's fields, shared with the CUDA templates

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
      if (mean_out) {  // a chain's kernel has no statistics outputs
        store1(mean_out + n * a.G + g, mean);
        store1(rstd_out + n * a.G + g, rstd);
      }
      for (int64_t c = c0; c < c0 + D; ++c) {
        const float scale = w ? rstd * to_f32(w[c]) : rstd;
        const float bias = sfma(-scale, mean, b ? to_f32(b[c]) : 0.0f);
        apply_plane(x + (n * a.C + c) * a.HW, y + (n * a.C + c) * a.HW, a.HW, scale, bias);
      }
    }
}

// The storage types of x, weight/bias and mean/rstd, picked at run time.
__attribute__((noinline)) int group_norm_run(const GnArgs& a) {
  return with_dtype(a.x_dtype, [&](auto t) {
    return with_dtype(a.w_dtype, [&](auto tw) {
      return with_dtype(a.stat_dtype, [&](auto ts) {
        gn_rows<decltype(t), decltype(tw), decltype(ts)>(a);
        return 0;
      });
    });
  });
}

#include "../_common/cpu_checks.h"  // the ISA region ends; cpu_ok and the host-side tensor checks


#include "../_common/group_norm_parse.h"  // the call's checks, shared with the CUDA templates

extern "C" int forge_kernel(const forge_call* call) {
  GnArgs a;
  if (parse_group_norm(call, a) || !cpu_ok()) return 1;
  if (a.N == 0) return 0;
  if (a.HW == 0) return 1;  // empty groups: the stock kernel's NaN statistics, not worth a path
  return group_norm_run(a);
}
