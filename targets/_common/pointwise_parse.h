// An elementwise call (pointwise_ops.h's table) as a loop plan (PwArgs, in
// pointwise_ops.h), for the CPU and the CUDA templates alike. Host code: the CPU templates include it after
// their ISA region (cpu_checks.h). Internal linkage: the package loads many
// candidates into one process.
//
namespace {

inline bool pw_scalar_value(const forge_scalar& v, float* out) {
  if (v.kind == FORGE_ARG_FLOAT) *out = static_cast<float>(v.f);
  else if (v.kind == FORGE_ARG_INT || v.kind == FORGE_ARG_BOOL) *out = static_cast<float>(v.i);
  else return false;
  return true;
}

// The op's scalar arguments (pointwise_ops.h's list). 0 when usable.
inline int pw_parse_scalars(const forge_call* call, PwScalars& s) {
  s = PwScalars{0.0f, 0.0f, 0.0f, 0, 0, 0};
  const int n = call->n_scalars;
  const forge_scalar* v = n ? call->scalars : nullptr;
#if PW_OP == PW_leaky_relu || PW_OP == PW_pow || PW_OP == PW_add || PW_OP == PW_sub
  if (n != 1 || !pw_scalar_value(v[0], &s.s0)) return 1;
#if PW_OP == PW_pow
  const float e = s.s0;
  if (!(e == 2.0f || e == 3.0f || e == 1.0f || e == -1.0f || e == -2.0f || e == 0.5f || e == -0.5f)) return 1;
#endif
#elif PW_OP == PW_softplus || PW_OP == PW_hardtanh
  if (n != 2 || !pw_scalar_value(v[0], &s.s0) || !pw_scalar_value(v[1], &s.s1)) return 1;
#if PW_OP == PW_softplus
  if (s.s0 == 0.0f) return 1;
#endif
#elif PW_OP == PW_elu
  if (n != 3 || !pw_scalar_value(v[0], &s.s0) || !pw_scalar_value(v[1], &s.s1) || !pw_scalar_value(v[2], &s.s2))
    return 1;
#elif PW_OP == PW_clamp
  if (n != 2) return 1;
  s.has_lo = v[0].kind != FORGE_ARG_NONE;
  s.has_hi = v[1].kind != FORGE_ARG_NONE;
  if ((s.has_lo && !pw_scalar_value(v[0], &s.s0)) || (s.has_hi && !pw_scalar_value(v[1], &s.s1))) return 1;
#elif PW_OP == PW_gelu
  if (n != 1 || v[0].kind != FORGE_ARG_STRING) return 1;
  const char* a = reinterpret_cast<const char*>(v[0].ints);
  const bool none = a[0] == 'n' && a[1] == 'o' && a[2] == 'n' && a[3] == 'e' && a[4] == 0;
  const bool tanh = a[0] == 't' && a[1] == 'a' && a[2] == 'n' && a[3] == 'h' && a[4] == 0;
  if (!none && !tanh) return 1;
  s.tanh_approx = tanh;
#else
  if (n != 0 || v) return 1;
#endif
  return 0;
}

// host_readable(p): may the host read a float64 at p (the CUDA template asks
// the runtime; on the CPU, always).
template <class HostReadable>
inline int parse_pointwise(const forge_call* call, PwArgs& a, HostReadable host_readable) {
  const int n_in = PW_BINARY ? 2 : 1;
  if (!call || call->n_inputs != n_in || call->n_outputs != 1) return 1;
  if (pw_parse_scalars(call, a.s)) return 1;
  const forge_tensor& y = call->outputs[0];
  if (!y.data || !host_float(y.dtype) || y.ndim < 0 || y.ndim > FORGE_MAX_DIMS) return 1;
  const int nd = y.ndim;
  a.y = y.data;
  a.y_dtype = y.dtype;
  a.numel = host_numel(y);
  // Output dims by decreasing stride (stable: ties keep their order).
  int order[FORGE_MAX_DIMS];
  int m = 0;
  for (int d = 0; d < nd; ++d) {
    if (y.sizes[d] < 0 || y.strides[d] < 0) return 1;
    if (y.sizes[d] == 1) continue;
    int k = m++;
    while (k > 0 && y.strides[order[k - 1]] < y.strides[d]) {
      order[k] = order[k - 1];
      --k;
    }
    order[k] = d;
  }
  // Each input's stride along each output dim (0: broadcast).
  int64_t st[3][FORGE_MAX_DIMS];
  for (int k = 0; k < m; ++k) st[0][k] = y.strides[order[k]];
  for (int i = 0; i < n_in; ++i) {
    const forge_tensor& x = call->inputs[i];
    PwOperand& o = a.in[i];
    o = PwOperand{x.data, x.dtype, 0, 0.0f, {}};
    if (x.ndim < 0 || x.ndim > nd) return 1;
    // One float64 or int64 element (a wrapped Python number: `x * 0.5`, `x + 1`):
    // the output's float type wins the promotion, and the value is read once,
    // converted to float as stock converts it.
    if ((x.dtype == FORGE_FLOAT64 || x.dtype == FORGE_INT64) && host_numel(x) == 1) {
      if (!x.data || !host_readable(x.data)) return 1;
      o.is_value = 1;
      o.value = x.dtype == FORGE_FLOAT64 ? static_cast<float>(*static_cast<const double*>(x.data))
                                         : static_cast<float>(*static_cast<const int64_t*>(x.data));
      for (int k = 0; k < m; ++k) st[i + 1][k] = 0;
      continue;
    }
    if (!host_float(x.dtype) || (!x.data && a.numel)) return 1;
    for (int k = 0; k < m; ++k) {
      const int d = order[k], dx = d - (nd - x.ndim);  // sizes align from the right
      if (dx < 0 || x.sizes[dx] == 1) st[i + 1][k] = 0;
      else if (x.sizes[dx] == y.sizes[d]) st[i + 1][k] = x.strides[dx];
      else return 1;
    }
    for (int dx = 0; dx < x.ndim; ++dx) {
      const int d = dx + (nd - x.ndim);
      if (x.sizes[dx] != 1 && x.sizes[dx] != y.sizes[d]) return 1;
    }
  }
  // Merge plan dims k and k+1 where every operand steps through them as one.
  int64_t sizes[FORGE_MAX_DIMS];
  for (int k = 0; k < m; ++k) sizes[k] = y.sizes[order[k]];
  int p = 0;
  for (int k = 0; k < m; ++k) {
    bool merge = p > 0;
    for (int t = 0; t <= n_in && merge; ++t) merge = st[t][p - 1] == st[t][k] * sizes[k];
    if (merge) {
      sizes[p - 1] *= sizes[k];
      for (int t = 0; t <= n_in; ++t) st[t][p - 1] = st[t][k];
    } else {
      sizes[p] = sizes[k];
      for (int t = 0; t <= n_in; ++t) st[t][p] = st[t][k];
      ++p;
    }
  }
  if (p == 0) {  // one element (or a rank-0 tensor)
    p = 1;
    sizes[0] = 1;
    for (int t = 0; t <= n_in; ++t) st[t][0] = 0;
  }
  a.ndim = p;
  for (int k = 0; k < p; ++k) {
    a.sizes[k] = sizes[k];
    a.y_strides[k] = st[0][k];
    for (int i = 0; i < n_in; ++i) a.in[i].strides[k] = st[i + 1][k];
  }
  // The output must not overlap itself: its plan strides nest (each dim's step
  // covers the inner dims' extent).
  int64_t span = 1;
  for (int k = p - 1; k >= 0; --k) {
    if (a.sizes[k] > 1 && a.y_strides[k] < span) return 1;
    if (a.sizes[k] > 1) span = a.y_strides[k] * a.sizes[k];
  }
  if (!PW_BINARY) a.in[1] = a.in[0];  // unused; keeps the struct defined
  return 0;
}

}  // namespace
